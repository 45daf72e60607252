// A go-redis v9 client run against manifold's Redis door and against redis-server: it
// connects with RESP3 (Protocol: 3, HELLO 3 AUTH user pass), runs each family's commands,
// pipelines, MULTI/EXEC, WATCH retry loops under contention and Pub/Sub, and prints one
// line per check. tests/python/test_redis_clients.py runs it against both servers and
// compares the outputs line by line.
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
	keys := []string{k("s"), k("n"), k("h"), k("l"), k("set"), k("z"), k("w"), k("tx1"), k("tx2"), k("p1"), k("p2")}
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
