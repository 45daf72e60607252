// A go-redis v9 client run against manifold's Redis door and against redis-server: it
// connects with RESP3 (Protocol: 3, HELLO 3 AUTH user pass), runs each family's commands,
// pipelines, MULTI/EXEC, WATCH retry loops under contention and Pub/Sub, and prints one
// line per check. tests/python/test_redis_clients.py runs it against both servers and
// compares the outputs line by line. Scripts (a Script object: EVALSHA, then EVAL on
// NOSCRIPT), streams with a consumer group, HyperLogLog, geo and the sorted-set algebra too.
//
//	go-redis-check ADDR USER PASSWORD PREFIX
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var failed bool

func check(name string, v any, err error) {
	if err != nil {
		if errors.Is(err, redis.Nil) {
			fmt.Printf("%s: nil\n", name)
			return
		}
		fmt.Printf("%s: error %s\n", name, err)
		return
	}
	fmt.Printf("%s: %v\n", name, v)
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

func sortedMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: go-redis-check ADDR USER PASSWORD PREFIX")
		os.Exit(2)
	}
	addr, user, pass, p := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := &redis.Options{
		Addr: addr, Username: user, Password: pass, Protocol: 3,
		DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		PoolSize: 8,
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	k := func(s string) string { return p + s }
	keys := []string{k("s"), k("n"), k("h"), k("l"), k("set"), k("z"), k("w"), k("tx1"), k("tx2"), k("p1"), k("p2"),
		k("sc"), k("x"), k("hll1"), k("hll2"), k("hll"), k("geo"), k("za"), k("zb"), k("zu")}
	check("del", 0, rdb.Del(ctx, keys...).Err())

	// Connection.
	check("ping", rdb.Ping(ctx).Val(), rdb.Ping(ctx).Err())
	hello, err := rdb.Do(ctx, "HELLO", "3").Result()
	if m, ok := hello.(map[any]any); ok && err == nil {
		check("hello", fmt.Sprintf("proto=%v server=%v version=%v", m["proto"], m["server"], m["version"]), nil)
	} else {
		check("hello", fmt.Sprintf("%T", hello), err)
	}

	// Strings.
	check("set", rdb.Set(ctx, k("s"), "hello", 0).Val(), rdb.Set(ctx, k("s"), "hello", 0).Err())
	check("get", rdb.Get(ctx, k("s")).Val(), rdb.Get(ctx, k("s")).Err())
	_, err = rdb.Get(ctx, k("missing")).Result()
	check("get missing", "", err)
	check("set nx", 0, rdb.SetNX(ctx, k("s"), "x", 0).Err())
	ok, err := rdb.SetNX(ctx, k("s"), "x", 0).Result()
	check("setnx again", ok, err)
	n, err := rdb.Incr(ctx, k("n")).Result()
	check("incr", n, err)
	n, err = rdb.IncrBy(ctx, k("n"), 41).Result()
	check("incrby", n, err)
	f, err := rdb.IncrByFloat(ctx, k("n"), 0.5).Result()
	check("incrbyfloat", f, err)
	_, err = rdb.Incr(ctx, k("s")).Result()
	check("incr not integer", "", err)
	mget, err := rdb.MGet(ctx, k("s"), k("missing"), k("n")).Result()
	check("mget", mget, err)

	// Hashes.
	hn, err := rdb.HSet(ctx, k("h"), "a", "1", "b", "2", "c", "3").Result()
	check("hset", hn, err)
	hall, err := rdb.HGetAll(ctx, k("h")).Result()
	check("hgetall", sortedMap(hall), err)
	hv, err := rdb.HGet(ctx, k("h"), "b").Result()
	check("hget", hv, err)
	hi, err := rdb.HIncrBy(ctx, k("h"), "a", 9).Result()
	check("hincrby", hi, err)
	hm, err := rdb.HMGet(ctx, k("h"), "a", "zz", "c").Result()
	check("hmget", hm, err)
	hl, err := rdb.HLen(ctx, k("h")).Result()
	check("hlen", hl, err)
	_, err = rdb.Get(ctx, k("h")).Result()
	check("get wrongtype", "", err)

	// Lists.
	ln, err := rdb.LPush(ctx, k("l"), "a", "b", "c").Result()
	check("lpush", ln, err)
	ln, err = rdb.RPush(ctx, k("l"), "z").Result()
	check("rpush", ln, err)
	lr, err := rdb.LRange(ctx, k("l"), 0, -1).Result()
	check("lrange", lr, err)
	lp, err := rdb.LPop(ctx, k("l")).Result()
	check("lpop", lp, err)
	li, err := rdb.LIndex(ctx, k("l"), -1).Result()
	check("lindex", li, err)

	// Sets.
	sn, err := rdb.SAdd(ctx, k("set"), "x", "y", "z", "x").Result()
	check("sadd", sn, err)
	sm, err := rdb.SMembers(ctx, k("set")).Result()
	check("smembers", sorted(sm), err)
	sb, err := rdb.SIsMember(ctx, k("set"), "y").Result()
	check("sismember", sb, err)
	sc, err := rdb.SCard(ctx, k("set")).Result()
	check("scard", sc, err)

	// Sorted sets.
	zn, err := rdb.ZAdd(ctx, k("z"), redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: -2, Member: "b"},
		redis.Z{Score: 10, Member: "c"}).Result()
	check("zadd", zn, err)
	zs, err := rdb.ZRangeWithScores(ctx, k("z"), 0, -1).Result()
	check("zrangewithscores", zs, err)
	zsc, err := rdb.ZScore(ctx, k("z"), "a").Result()
	check("zscore", zsc, err)
	zi, err := rdb.ZIncrBy(ctx, k("z"), 0.25, "a").Result()
	check("zincrby", zi, err)
	zr, err := rdb.ZRank(ctx, k("z"), "c").Result()
	check("zrank", zr, err)
	zrs, err := rdb.ZRangeByScore(ctx, k("z"), &redis.ZRangeBy{Min: "-inf", Max: "2"}).Result()
	check("zrangebyscore", zrs, err)

	// Keys and expiry.
	ty, err := rdb.Type(ctx, k("z")).Result()
	check("type", ty, err)
	ex, err := rdb.Expire(ctx, k("s"), 100*time.Second).Result()
	check("expire", ex, err)
	ttl, err := rdb.TTL(ctx, k("s")).Result()
	check("ttl", ttl > 90*time.Second && ttl <= 100*time.Second, err)
	exn, err := rdb.Exists(ctx, k("s"), k("h"), k("missing")).Result()
	check("exists", exn, err)

	// A pipeline (no transaction): replies in order, errors in place.
	cmds, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, k("p1"), "v1", 0)
		pipe.Incr(ctx, k("p2"))
		pipe.Incr(ctx, k("p1"))
		pipe.Get(ctx, k("p1"))
		pipe.HGetAll(ctx, k("h"))
		pipe.LRange(ctx, k("l"), 0, -1)
		return nil
	})
	check("pipelined", len(cmds), err)
	for i, c := range cmds {
		check(fmt.Sprintf("pipelined %d", i), c.String(), nil)
	}

	// MULTI/EXEC.
	cmds, err = rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, k("tx1"), "1", 0)
		pipe.IncrBy(ctx, k("tx1"), 5)
		pipe.RPush(ctx, k("tx2"), "a", "b")
		pipe.LLen(ctx, k("tx2"))
		return nil
	})
	check("txpipelined", len(cmds), err)
	for i, c := range cmds {
		check(fmt.Sprintf("txpipelined %d", i), c.String(), nil)
	}
	// A transaction with a run-time error: the others still run.
	cmds, err = rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Incr(ctx, k("tx1"))
		pipe.Incr(ctx, k("tx2"))
		pipe.Get(ctx, k("tx1"))
		return nil
	})
	check("txpipelined error", len(cmds), err)
	for i, c := range cmds {
		check(fmt.Sprintf("txpipelined error %d", i), c.String(), nil)
	}

	// WATCH: an optimistic-lock increment from several goroutines, each retrying on
	// TxFailedErr; no increment may be lost.
	const workers, each = 4, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				for attempt := 0; ; attempt++ {
					err := rdb.Watch(ctx, func(tx *redis.Tx) error {
						v, err := tx.Get(ctx, k("w")).Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
							pipe.Set(ctx, k("w"), v+1, 0)
							return nil
						})
						return err
					}, k("w"))
					if err == nil {
						break
					}
					if errors.Is(err, redis.TxFailedErr) && attempt < 1000 {
						continue
					}
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					break
				}
			}
		}()
	}
	wg.Wait()
	wv, err := rdb.Get(ctx, k("w")).Int()
	check("watch increments", fmt.Sprintf("%d of %d, errors %v", wv, workers*each, errs), err)
	if wv != workers*each {
		failed = true
	}

	// Pub/Sub.
	sub := rdb.Subscribe(ctx, p+"chan")
	_, err = sub.Receive(ctx) // the subscription's confirmation
	check("subscribe", "", err)
	recv, err := rdb.Publish(ctx, p+"chan", "msg-1").Result()
	check("publish", recv, err)
	msg, err := sub.ReceiveMessage(ctx)
	if err == nil {
		check("message", msg.Channel+" "+msg.Payload, nil)
	} else {
		check("message", "", err)
	}
	psub := rdb.PSubscribe(ctx, p+"pat*")
	_, err = psub.Receive(ctx)
	check("psubscribe", "", err)
	recv, err = rdb.Publish(ctx, p+"pat-x", "msg-2").Result()
	check("publish pattern", recv, err)
	msg, err = psub.ReceiveMessage(ctx)
	if err == nil {
		check("pmessage", msg.Pattern+" "+msg.Channel+" "+msg.Payload, nil)
	} else {
		check("pmessage", "", err)
	}
	check("unsubscribe", "", sub.Close())
	check("punsubscribe", "", psub.Close())

	scripts(ctx, rdb, k)
	streams(ctx, rdb, k)
	moreTypes(ctx, rdb, k)

	// SCAN through the iterator.
	var scanned []string
	iter := rdb.Scan(ctx, 0, p+"*", 2).Iterator()
	for iter.Next(ctx) {
		scanned = append(scanned, iter.Val())
	}
	check("scan", sorted(scanned), iter.Err())

	check("cleanup", 0, rdb.Del(ctx, keys...).Err())
	if failed {
		os.Exit(1)
	}
}

// Scripts as go-redis's users (rate limiters, locks) run them: a Script object sends
// EVALSHA and falls back to EVAL on NOSCRIPT.
func scripts(ctx context.Context, rdb *redis.Client, k func(string) string) {
	incr := redis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if v > tonumber(ARGV[2]) then return redis.error_reply('over the limit') end
return {v, redis.call('TYPE', KEYS[1])['ok'], redis.pcall('HGET', KEYS[1], 'x')['err']}`)
	check("script flush", "", rdb.ScriptFlush(ctx).Err())
	v, err := incr.Run(ctx, rdb, []string{k("sc")}, 5, 100).Result()
	check("script run", v, err)
	v, err = incr.Run(ctx, rdb, []string{k("sc")}, 200, 100).Result()
	check("script over", v, err)
	ex, err := incr.Exists(ctx, rdb).Result()
	check("script exists", ex, err)
	sha, err := rdb.ScriptLoad(ctx, "return {ARGV[1], #KEYS, 3.99, true, false}").Result()
	check("script load", sha, err)
	v, err = rdb.EvalSha(ctx, sha, []string{k("a"), k("b")}, "x").Result()
	check("evalsha", v, err)
	_, err = rdb.EvalSha(ctx, "ffffffffffffffffffffffffffffffffffffffff", nil).Result()
	check("evalsha unknown", "", err)
	v, err = rdb.EvalRO(ctx, "return redis.call('GET', KEYS[1])", []string{k("sc")}).Result()
	check("eval_ro", v, err)
	_, err = rdb.EvalRO(ctx, "return redis.call('SET', KEYS[1], 1)", []string{k("sc")}).Result()
	check("eval_ro write", "", err)
	v, err = rdb.Eval(ctx, "redis.setresp(3); return redis.call('HELLO', 3)['proto']", nil).Result()
	check("eval resp3", v, err)
	v, err = rdb.Eval(ctx, "return cjson.encode({a = {1, 2}, b = cjson.decode('[true]')})", nil).Result()
	check("eval cjson", v, err)
	_, err = rdb.Eval(ctx, "return nosuch.x", nil).Result()
	check("eval runtime error", "", err)
	_, err = rdb.Eval(ctx, "return (", nil).Result()
	check("eval compile error", "", err)
}

// Streams and consumer groups as go-redis's users run them: a producer, a group's
// consumers reading, acknowledging and claiming, and a blocked reader woken by an XADD.
func streams(ctx context.Context, rdb *redis.Client, k func(string) string) {
	x := k("x")
	for i, id := range []string{"1-1", "2-1", "3-1"} {
		got, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: x, ID: id, Values: []string{"n", fmt.Sprint(i), "f", "v"}}).Result()
		check("xadd", got, err)
	}
	_, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: x, ID: "1-0", Values: []string{"a", "b"}}).Result()
	check("xadd smaller id", "", err)
	l, err := rdb.XLen(ctx, x).Result()
	check("xlen", l, err)
	r, err := rdb.XRange(ctx, x, "-", "+").Result()
	check("xrange", r, err)
	r, err = rdb.XRevRangeN(ctx, x, "+", "-", 2).Result()
	check("xrevrange", r, err)
	rd, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{x, "1-1"}, Count: 1}).Result()
	check("xread", rd, err)
	check("xgroup create", "", rdb.XGroupCreate(ctx, x, "g", "0").Err())
	check("xgroup create again", "", rdb.XGroupCreate(ctx, x, "g", "0").Err())
	rd, err = rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{x, ">"}, Count: 2}).Result()
	check("xreadgroup", rd, err)
	pend, err := rdb.XPending(ctx, x, "g").Result()
	if err == nil {
		check("xpending", fmt.Sprintf("%d %s %s %v", pend.Count, pend.Lower, pend.Higher, pend.Consumers), nil)
	} else {
		check("xpending", "", err)
	}
	ext, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: x, Group: "g", Start: "-", End: "+", Count: 10}).Result()
	for _, e := range ext {
		check("xpending ext", fmt.Sprintf("%s %s %d", e.ID, e.Consumer, e.RetryCount), nil)
	}
	check("xpending ext", len(ext), err)
	n, err := rdb.XAck(ctx, x, "g", "1-1", "9-9").Result()
	check("xack", n, err)
	cl, err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: x, Group: "g", Consumer: "c2", Messages: []string{"2-1"}}).Result()
	check("xclaim", cl, err)
	ac, next, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: x, Group: "g", Consumer: "c3", Start: "0", Count: 5}).Result()
	check("xautoclaim", fmt.Sprintf("%v next %s", ac, next), err)
	groups, err := rdb.XInfoGroups(ctx, x).Result()
	check("xinfo groups", groups, err)
	info, err := rdb.XInfoStream(ctx, x).Result()
	if err == nil {
		check("xinfo stream", fmt.Sprintf("%d %s %d %v %v %d", info.Length, info.LastGeneratedID, info.EntriesAdded,
			info.FirstEntry, info.LastEntry, info.Groups), nil)
	} else {
		check("xinfo stream", "", err)
	}
	// A consumer blocked on the group is woken by an XADD from another connection.
	woken := make(chan string, 1)
	go func() {
		got, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c4", Streams: []string{x, ">"},
			Count: 1, Block: 20 * time.Second}).Result()
		woken <- fmt.Sprint(got, err)
	}()
	for {
		cs, err := rdb.XInfoConsumers(ctx, x, "g").Result()
		seen := false
		for _, c := range cs {
			seen = seen || c.Name == "c4"
		}
		if seen || err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err = rdb.XAdd(ctx, &redis.XAddArgs{Stream: x, ID: "4-1", Values: []string{"late", "1"}}).Result()
	check("xadd wakes", "", err)
	check("xreadgroup block", <-woken, nil)
	n, err = rdb.XTrimMaxLen(ctx, x, 2).Result()
	check("xtrim", n, err)
	n, err = rdb.XDel(ctx, x, "4-1", "8-8").Result()
	check("xdel", n, err)
	n, err = rdb.XGroupDestroy(ctx, x, "g").Result()
	check("xgroup destroy", n, err)
}

// HyperLogLog, geo and the sorted-set algebra.
func moreTypes(ctx context.Context, rdb *redis.Client, k func(string) string) {
	for i := 0; i < 3; i++ {
		vals := make([]any, 0, 200)
		for j := 0; j < 200; j++ {
			vals = append(vals, fmt.Sprintf("e%d", i*100+j))
		}
		n, err := rdb.PFAdd(ctx, k(fmt.Sprintf("hll%d", i%2+1)), vals...).Result()
		check("pfadd", n, err)
	}
	c, err := rdb.PFCount(ctx, k("hll1"), k("hll2")).Result()
	check("pfcount union", c, err)
	check("pfmerge", "", rdb.PFMerge(ctx, k("hll"), k("hll1"), k("hll2")).Err())
	c, err = rdb.PFCount(ctx, k("hll")).Result()
	check("pfcount", c, err)
	raw, err := rdb.Get(ctx, k("hll")).Result()
	check("hll bytes", fmt.Sprintf("%x", raw), err)

	n, err := rdb.GeoAdd(ctx, k("geo"),
		&redis.GeoLocation{Name: "Palermo", Longitude: 13.361389, Latitude: 38.115556},
		&redis.GeoLocation{Name: "Catania", Longitude: 15.087269, Latitude: 37.502669}).Result()
	check("geoadd", n, err)
	pos, err := rdb.GeoPos(ctx, k("geo"), "Palermo", "nowhere").Result()
	check("geopos", fmt.Sprint(*pos[0], pos[1]), err)
	d, err := rdb.GeoDist(ctx, k("geo"), "Palermo", "Catania", "km").Result()
	check("geodist", d, err)
	h, err := rdb.GeoHash(ctx, k("geo"), "Palermo", "Catania").Result()
	check("geohash", h, err)

	rdb.ZAdd(ctx, k("za"), redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"})
	rdb.ZAdd(ctx, k("zb"), redis.Z{Score: 10, Member: "b"}, redis.Z{Score: 20, Member: "c"})
	n, err = rdb.ZUnionStore(ctx, k("zu"), &redis.ZStore{Keys: []string{k("za"), k("zb")}, Weights: []float64{2, 1}}).Result()
	check("zunionstore", n, err)
	zs, err := rdb.ZRangeWithScores(ctx, k("zu"), 0, -1).Result()
	check("zunion result", zs, err)
	zs, err = rdb.ZInterWithScores(ctx, &redis.ZStore{Keys: []string{k("za"), k("zb")}, Aggregate: "MAX"}).Result()
	check("zinter", zs, err)
	diff, err := rdb.ZDiff(ctx, k("za"), k("zb")).Result()
	check("zdiff", diff, err)
	n, err = rdb.ZInterCard(ctx, 0, k("za"), k("zb")).Result()
	check("zintercard", n, err)
}
