-- sysbench script for bench/redis.sh: the Redis door's GET and SET as SQL, one statement per
-- event, for the target manifold-sql (manifold's MySQL port).
--
--   get: SELECT v FROM kv WHERE k = ?                       (a point select by key)
--   set: INSERT INTO kv (k, v) VALUES (?, ?)
--        ON DUPLICATE KEY UPDATE v = VALUES(v), version = version + 1
--                                                            (an autocommit upsert)
--
-- Each thread prepares its statement once (server-side prepared statements with
-- --db-ps-mode=auto; each event is one COM_STMT_EXECUTE) and runs it on keys drawn uniformly
-- from key:000000000000 .. key:<kv_keys - 1>, redis-benchmark's key names with -r, with a
-- value of kv_size bytes of 'x' (redis-benchmark's value). The table `kv` (k VARBINARY(64)
-- primary key, v LONGBLOB, version BIGINT: bumped by every write, as the door does, so an
-- upsert of the same value is still a write and a commit) is created and filled by
-- bench/redis.sh. A failed statement stops
-- the run (FATAL) instead of being counted; so does a GET that finds no row, so the figures
-- are of hits.
--
--   sysbench bench/redis_kv.lua --mysql-host=127.0.0.1 --mysql-port=... --mysql-user=app \
--     --mysql-password=app --mysql-db=kvbench --db-ps-mode=auto --threads=128 \
--     --events=100000 --time=0 --kv_test=get --kv_size=128 run

sysbench.cmdline.options = {
   kv_test = {"get (point select) or set (autocommit upsert)", "get"},
   kv_size = {"value size in bytes", 128},
   kv_keys = {"keys: key:000000000000 .. kv_keys - 1", 100000},
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   local t = sysbench.sql.type
   test = sysbench.opt.kv_test
   size = tonumber(sysbench.opt.kv_size)
   keys = tonumber(sysbench.opt.kv_keys)
   if test == "get" then
      stmt = con:prepare("SELECT v FROM kv WHERE k = ?")
      key = stmt:bind_create(t.VARCHAR, 64)
      stmt:bind_param(key)
   elseif test == "set" then
      stmt = con:prepare("INSERT INTO kv (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v), version = version + 1")
      key = stmt:bind_create(t.VARCHAR, 64)
      value = stmt:bind_create(t.VARCHAR, size)
      stmt:bind_param(key, value)
      value:set(string.rep("x", size))
   else
      error("kv_test must be get or set, not " .. tostring(test))
   end
end

function thread_done()
   stmt:close()
   con:disconnect()
end

function event()
   k = string.format("key:%012d", sysbench.rand.uniform(0, keys - 1))
   key:set(k)
   local rs = stmt:execute()
   -- sysbench keeps a prepared statement's rows to itself (no fetch_row): their count is
   -- the check.
   if test == "get" and (rs == nil or tonumber(rs.nrows) ~= 1) then
      error("GET found " .. tostring(rs and rs.nrows) .. " rows for " .. k)
   end
end
