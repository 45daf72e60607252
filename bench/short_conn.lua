-- sysbench script for bench/short_conn.sh: one event = one short connection.
--
--   connect (TCP, handshake, login with the server's auth plugin: mysql_native_password for
--   the testkit's app user), SELECT 1 (result checked), COM_QUIT + close.
--
-- Run with the mysql driver options of sysbench, e.g.
--   sysbench bench/short_conn.lua --mysql-host=127.0.0.1 --mysql-port=3306 \
--     --mysql-user=app --mysql-password=app --mysql-db= --threads=16 --time=15 run
-- (--mysql-db= : no default database, so the login carries none). Events per second are
-- connections per second. A failed connect or query is fatal: it stops the run with an error
-- instead of being counted.

function thread_init()
   drv = sysbench.sql.driver()
end

function event()
   local con = drv:connect()
   local v = con:query_row("SELECT 1")
   if v ~= "1" then
      error("SELECT 1 returned " .. tostring(v))
   end
   con:disconnect()
end
