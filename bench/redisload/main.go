// redisload: the load bench/redis.sh drives where redis-benchmark cannot, because a request
// is two commands, the second either sent with the first as one pipeline or depending on the
// first's reply. go-redis v9, RESP2 (as redis-benchmark), one connection per client.
//
//	redisload -addr HOST:PORT -user U -password P -test TEST -clients C -requests N [-pipeline P]
//
// Tests (-test):
//
//	getincr-pipe  GET key:<r1> and INCR counter:<r2> written together as one pipeline, then
//	              both replies read (r1, r2 random below -keys, 12 digits, as redis-benchmark's
//	              __rand_int__): one request, to set beside one EVALSHA of a script doing both
//	xreadgroup    XREADGROUP GROUP g c<i> COUNT 1 STREAMS xrg:<s> > and then XACK xrg:<s> g <id>
//	              of the entry it got: one request (client i reads stream i mod -streams)
//	fill-streams  not a measured test: DEL, XGROUP CREATE g $ MKSTREAM and -entries XADDs of
//	              one field of -size bytes on each of the -streams streams, pipelined (the
//	              entries the next xreadgroup run consumes)
//
// With -pipeline P, a client sends P requests at once: P pairs in one pipeline
// (getincr-pipe), or P XREADGROUPs in one pipeline and then the P XACKs in another
// (xreadgroup); a latency is a batch's, as redis-benchmark's under -P.
//
// Output, on stdout: redis-benchmark's --csv lines (a header, then
// "TEST","rps","avg","min","p50","p95","p99","max", latencies in ms), then
// "redisload: requests N elapsed_s S errors E" and, if E > 0, "redisload: first error: ...".
// An error reply, an XREADGROUP that finds no entry (the stream drained) and a failed
// connection each count as an error; exit 1 if there was any.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const group = "g"

type settings struct {
	test     string
	clients  int
	requests int64
	pipeline int
	keys     int
	streams  int
	entries  int
	size     int
}

// errorCount counts failed requests and keeps the first error's text.
type errorCount struct {
	n     atomic.Int64
	once  sync.Once
	first string
}

func (e *errorCount) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err.Error() })
}

var errDrained = errors.New("XREADGROUP found no entry: the stream is drained (fill it with more entries)")

func streamName(i int) string { return fmt.Sprintf("xrg:%04d", i) }

func main() {
	var s settings
	addr := flag.String("addr", "127.0.0.1:6379", "server address")
	user := flag.String("user", "", "ACL user")
	password := flag.String("password", "", "password")
	flag.StringVar(&s.test, "test", "", "getincr-pipe, xreadgroup or fill-streams")
	flag.IntVar(&s.clients, "clients", 128, "connections")
	flag.Int64Var(&s.requests, "requests", 100000, "requests in all")
	flag.IntVar(&s.pipeline, "pipeline", 1, "requests a client sends at once")
	flag.IntVar(&s.keys, "keys", 100000, "key space of getincr-pipe")
	flag.IntVar(&s.streams, "streams", 128, "streams of xreadgroup and fill-streams")
	flag.IntVar(&s.entries, "entries", 1000, "entries per stream (fill-streams)")
	flag.IntVar(&s.size, "size", 128, "bytes of an entry's field value (fill-streams)")
	flag.Parse()
	if s.clients < 1 || s.requests < 1 || s.pipeline < 1 || s.keys < 1 || s.streams < 1 || s.entries < 0 || s.size < 0 {
		fmt.Fprintln(os.Stderr, "redisload: -clients, -requests, -pipeline, -keys and -streams must be positive")
		os.Exit(2)
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:     *addr,
		Username: *user,
		Password: *password,
		// As redis-benchmark: RESP2, no CLIENT SETINFO, no retries (a retried request would
		// be counted once but cost twice), timeouts long enough for a durable server's queue.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		PoolSize:                 s.clients,
		DialTimeout:              10 * time.Second,
		ReadTimeout:              60 * time.Second,
		WriteTimeout:             60 * time.Second,
	})
	defer rdb.Close()
	ctx := context.Background()
	var errs errorCount
	switch s.test {
	case "fill-streams":
		fill(ctx, rdb, s, &errs)
		if n := errs.n.Load(); n > 0 {
			fmt.Printf("redisload: fill-streams: %d errors, first: %s\n", n, errs.first)
			os.Exit(1)
		}
		fmt.Printf("redisload: %d streams of %d entries of %d bytes\n", s.streams, s.entries, s.size)
	case "getincr-pipe", "xreadgroup":
		run(ctx, rdb, s, &errs)
	default:
		fmt.Fprintf(os.Stderr, "redisload: unknown -test %q (getincr-pipe, xreadgroup, fill-streams)\n", s.test)
		os.Exit(2)
	}
}

// fill empties each stream and writes s.entries entries to it, in pipelines of 1000 XADDs,
// the streams shared among up to s.clients connections.
func fill(ctx context.Context, rdb *redis.Client, s settings, errs *errorCount) {
	value := strings.Repeat("x", s.size)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(s.clients, s.streams, 16) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= s.streams {
					return
				}
				name := streamName(i)
				_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.Del(ctx, name)
					p.XGroupCreateMkStream(ctx, name, group, "$")
					return nil
				})
				if err != nil {
					errs.add(fmt.Errorf("%s: %w", name, err))
					continue
				}
				for done := 0; done < s.entries; {
					batch := min(1000, s.entries-done)
					cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
						for range batch {
							p.XAdd(ctx, &redis.XAddArgs{Stream: name, Values: []any{"field", value}})
						}
						return nil
					})
					for _, c := range cmds {
						if c.Err() != nil {
							errs.add(fmt.Errorf("%s: %w", name, c.Err()))
						}
					}
					done += batch
				}
			}
		})
	}
	wg.Wait()
}

// run sends s.requests requests over s.clients connections, each its own goroutine taking
// batches of s.pipeline requests until none are left, and prints the figures.
func run(ctx context.Context, rdb *redis.Client, s settings, errs *errorCount) {
	conns := make([]*redis.Conn, s.clients)
	for i := range conns {
		conns[i] = rdb.Conn()
		// Connected and authenticated before the clock starts, as redis-benchmark's clients.
		if err := conns[i].Ping(ctx).Err(); err != nil {
			fmt.Printf("redisload: connection %d: %s\n", i, err)
			os.Exit(1)
		}
	}
	var next, done atomic.Int64
	latencies := make([][]time.Duration, s.clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i, conn := range conns {
		wg.Go(func() {
			defer conn.Close()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			stream := streamName(i % s.streams)
			consumer := fmt.Sprintf("c%d", i)
			for {
				from := next.Add(int64(s.pipeline)) - int64(s.pipeline)
				if from >= s.requests {
					return
				}
				batch := int(min(int64(s.pipeline), s.requests-from))
				t0 := time.Now()
				var ok bool
				if s.test == "getincr-pipe" {
					ok = getIncr(ctx, conn, rng, s.keys, batch, errs)
				} else {
					ok = readAck(ctx, conn, stream, consumer, batch, errs)
				}
				latencies[i] = append(latencies[i], time.Since(t0))
				done.Add(int64(batch))
				if !ok {
					// The connection failed: the requests it would have sent are not sent.
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	report(s, done.Load(), latencies, elapsed, errs)
}

// brokenConnection reports whether err is not an error reply but the connection's failure.
func brokenConnection(err error) bool {
	var reply redis.Error
	return err != nil && !errors.Is(err, redis.Nil) && !errors.As(err, &reply)
}

func getIncr(ctx context.Context, conn *redis.Conn, rng *rand.Rand, keys, batch int, errs *errorCount) bool {
	cmds, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range batch {
			p.Get(ctx, fmt.Sprintf("key:%012d", rng.IntN(keys)))
			p.Incr(ctx, fmt.Sprintf("counter:%012d", rng.IntN(keys)))
		}
		return nil
	})
	// A GET of a missing key is a nil reply, not an error (every key is written first).
	for j := 0; j < len(cmds); j += 2 {
		for _, c := range cmds[j:min(j+2, len(cmds))] {
			if c.Err() != nil && !errors.Is(c.Err(), redis.Nil) {
				errs.add(c.Err())
				break
			}
		}
	}
	if len(cmds) == 0 && err != nil {
		errs.add(err)
	}
	return !brokenConnection(err)
}

func readAck(ctx context.Context, conn *redis.Conn, stream, consumer string, batch int, errs *errorCount) bool {
	cmds, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range batch {
			p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer, Streams: []string{stream, ">"}, Count: 1, Block: -1})
		}
		return nil
	})
	if brokenConnection(err) {
		errs.add(err)
		return false
	}
	var ids []string
	for _, c := range cmds {
		res, err := c.(*redis.XStreamSliceCmd).Result()
		switch {
		case errors.Is(err, redis.Nil) || (err == nil && (len(res) == 0 || len(res[0].Messages) == 0)):
			errs.add(errDrained)
		case err != nil:
			errs.add(err)
		default:
			ids = append(ids, res[0].Messages[0].ID)
		}
	}
	if len(ids) == 0 {
		return true
	}
	cmds, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.XAck(ctx, stream, group, id)
		}
		return nil
	})
	for _, c := range cmds {
		n, err := c.(*redis.IntCmd).Result()
		if err == nil && n != 1 {
			err = fmt.Errorf("XACK %s %s %s acknowledged %d entries, not 1", stream, group, ids[0], n)
		}
		if err != nil {
			errs.add(err)
		}
	}
	if len(cmds) == 0 && err != nil {
		errs.add(err)
	}
	return !brokenConnection(err)
}

func report(s settings, done int64, latencies [][]time.Duration, elapsed time.Duration, errs *errorCount) {
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	var avg time.Duration
	if len(all) > 0 {
		avg = sum / time.Duration(len(all))
	}
	rps := float64(done) / elapsed.Seconds()
	name := map[string]string{"getincr-pipe": "GET+INCR", "xreadgroup": "XREADGROUP+XACK"}[s.test]
	fmt.Println(`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`)
	fmt.Printf("%q,\"%.2f\",\"%s\",\"%s\",\"%s\",\"%s\",\"%s\",\"%s\"\n", name, rps, ms(avg), ms(pct(0)),
		ms(pct(0.5)), ms(pct(0.95)), ms(pct(0.99)), ms(pct(1)))
	n := errs.n.Load()
	fmt.Printf("redisload: requests %d elapsed_s %.3f errors %d\n", done, elapsed.Seconds(), n)
	if n > 0 {
		fmt.Printf("redisload: first error: %s\n", errs.first)
		os.Exit(1)
	}
}
