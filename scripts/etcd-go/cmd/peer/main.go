// The Go peer: etcd's own client/v3/concurrency (the Mutex and Election the SDK ports) at the version go.mod
// pins, driven by the interop tests and the bench. Every line it writes to stdout is one JSON object.
//
//	peer lock  <endpoints> <name> <ttl>           locks; prints {"event":"locked",...}; then reads commands
//	peer elect <endpoints> <name> <value> <ttl>   campaigns; prints {"event":"leader",...}; then reads commands
//
// Commands on stdin, one per line, each answered with one line: `write <key> <value>` (a put fenced by the
// holding's key: its create revision for a lock, as Go's Mutex offers no more), `unlock` / `resign` (then exit).
//
//	peer cycles   <endpoints> <name> <n>                          n lock+unlock on one session, each timed
//	peer hot      <endpoints> <name> <workers> <seconds> <holdMs> workers sessions on one name
//	peer distinct <endpoints> <prefix> <workers> <seconds>        workers sessions, a name each
//	peer count    <endpoints> <name> <counter> <workers> <seconds> workers sessions on one name, each holding
//	                                                              adds 1 to the counter key: read, fenced put
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func main() {
	if len(os.Args) < 3 {
		fail("usage: peer lock|elect|cycles|hot|distinct <endpoints> ...")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Args[2], ","), DialTimeout: 5 * time.Second})
	if err != nil {
		fail(err.Error())
	}
	defer cli.Close()
	args := os.Args[3:]
	switch os.Args[1] {
	case "lock":
		lock(cli, args[0], atoi(args[1]))
	case "elect":
		elect(cli, args[0], args[1], atoi(args[2]))
	case "cycles":
		cycles(cli, args[0], atoi(args[1]))
	case "hot":
		hot(cli, args[0], atoi(args[1]), atoi(args[2]), atoi(args[3]))
	case "distinct":
		distinct(cli, args[0], atoi(args[1]), atoi(args[2]))
	case "count":
		count(cli, args[0], args[1], atoi(args[2]), atoi(args[3]))
	default:
		fail("unknown command " + os.Args[1])
	}
}

func lock(cli *clientv3.Client, name string, ttl int) {
	session := newSession(cli, ttl)
	defer session.Close()
	mutex := concurrency.NewMutex(session, name)
	if err := mutex.Lock(context.Background()); err != nil {
		fail(err.Error())
	}
	revision := mutex.Header().Revision
	say(map[string]any{"event": "locked", "key": mutex.Key(), "revision": revision, "lease": fmt.Sprint(session.Lease())})
	commands(cli, mutex.Key(), func() {
		if err := mutex.Unlock(context.Background()); err != nil {
			fail(err.Error())
		}
		say(map[string]any{"event": "unlocked"})
	})
}

func elect(cli *clientv3.Client, name, value string, ttl int) {
	session := newSession(cli, ttl)
	defer session.Close()
	election := concurrency.NewElection(session, name)
	if err := election.Campaign(context.Background(), value); err != nil {
		fail(err.Error())
	}
	say(map[string]any{"event": "leader", "key": election.Key(), "revision": election.Rev(), "lease": fmt.Sprint(session.Lease())})
	commands(cli, election.Key(), func() {
		if err := election.Resign(context.Background()); err != nil {
			fail(err.Error())
		}
		say(map[string]any{"event": "resigned"})
	})
}

// commands answers `write` lines until `unlock` or `resign` (then `end`), or until stdin closes.
func commands(cli *clientv3.Client, key string, end func()) {
	created, err := cli.Get(context.Background(), key)
	if err != nil || len(created.Kvs) == 0 {
		fail(fmt.Sprintf("own key %s not found: %v", key, err))
	}
	revision := created.Kvs[0].CreateRevision
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		switch {
		case len(fields) == 3 && fields[0] == "write":
			resp, err := cli.Txn(context.Background()).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", revision)).
				Then(clientv3.OpPut(fields[1], fields[2])).Commit()
			if err != nil {
				fail(err.Error())
			}
			say(map[string]any{"event": "written", "ok": resp.Succeeded})
		case len(fields) == 1 && (fields[0] == "unlock" || fields[0] == "resign"):
			end()
			return
		}
	}
	end()
}

func cycles(cli *clientv3.Client, name string, n int) {
	session := newSession(cli, 60)
	defer session.Close()
	mutex := concurrency.NewMutex(session, name)
	ctx := context.Background()
	cpu := cpuTime()
	started := time.Now()
	each := make([]float64, n)
	for i := 0; i < n; i++ {
		cycle := time.Now()
		if err := mutex.Lock(ctx); err != nil {
			fail(err.Error())
		}
		if err := mutex.Unlock(ctx); err != nil {
			fail(err.Error())
		}
		each[i] = float64(time.Since(cycle).Microseconds()) / 1000
	}
	elapsed := time.Since(started)
	say(map[string]any{"cycles": n, "usPerCycle": float64(elapsed.Microseconds()) / float64(n), "cpuUsPerCycle": float64(cpuTime()-cpu) / float64(n), "latencies": each})
}

// hot runs workers sessions on one name for seconds: each locks, holds holdMs, unlocks, again. A handoff's
// latency is from one holder's unlock call to the next holder's Lock returning; each is printed (ms).
func hot(cli *clientv3.Client, name string, workers, seconds, holdMs int) {
	sessions := make([]*concurrency.Session, workers)
	for i := range sessions {
		sessions[i] = newSession(cli, 10)
	}
	var mu sync.Mutex
	var lastUnlock time.Time
	var latencies []float64
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	cpu := cpuTime()
	started := time.Now()
	var wg sync.WaitGroup
	for _, session := range sessions {
		wg.Add(1)
		go func(s *concurrency.Session) {
			defer wg.Done()
			mutex := concurrency.NewMutex(s, name)
			ctx := context.Background()
			for time.Now().Before(deadline) {
				if err := mutex.Lock(ctx); err != nil {
					return
				}
				mu.Lock()
				if !lastUnlock.IsZero() {
					latencies = append(latencies, float64(time.Since(lastUnlock).Microseconds())/1000)
				}
				mu.Unlock()
				time.Sleep(time.Duration(holdMs) * time.Millisecond)
				// As the SDK's bench times a handoff: from the holder's unlock call (no one else can set it
				// meanwhile: we hold the lock) to the next holder's Lock returning.
				mu.Lock()
				lastUnlock = time.Now()
				mu.Unlock()
				if err := mutex.Unlock(ctx); err != nil {
					return
				}
			}
		}(session)
	}
	wg.Wait()
	elapsed := time.Since(started).Seconds()
	for _, s := range sessions {
		s.Close()
	}
	sort.Float64s(latencies)
	n := len(latencies)
	say(map[string]any{"handoffs": n, "rate": float64(n) / elapsed, "p99": quantile(latencies, 0.99), "p999": quantile(latencies, 0.999), "cpuUsPerHandoff": float64(cpuTime()-cpu) / float64(max(n, 1)), "latencies": latencies})
}

func distinct(cli *clientv3.Client, prefix string, workers, seconds int) {
	cpu := cpuTime()
	var total int64
	var mu sync.Mutex
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	started := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			session := newSession(cli, 10)
			defer session.Close()
			mutex := concurrency.NewMutex(session, fmt.Sprintf("%s/%d", prefix, w))
			ctx := context.Background()
			n := int64(0)
			for time.Now().Before(deadline) {
				if mutex.Lock(ctx) != nil || mutex.Unlock(ctx) != nil {
					break
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	say(map[string]any{"cycles": total, "rate": float64(total) / time.Since(started).Seconds(), "cpuUsPerCycle": float64(cpuTime()-cpu) / float64(max(total, 1))})
}

// count adds 1 to the counter key under the lock, again and again, from workers sessions: a read, then a put
// fenced by the holder's key. Two holders at once would read one value and lose an increment; the test compares
// the counter with every side's count of fenced puts that landed.
func count(cli *clientv3.Client, name, counter string, workers, seconds int) {
	var total, refused int64
	var mu sync.Mutex
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := newSession(cli, 10)
			defer session.Close()
			mutex := concurrency.NewMutex(session, name)
			ctx := context.Background()
			for time.Now().Before(deadline) {
				if err := mutex.Lock(ctx); err != nil {
					fail(err.Error())
				}
				got, err := cli.Get(ctx, counter)
				if err != nil {
					fail(err.Error())
				}
				n := 0
				if len(got.Kvs) > 0 {
					n = atoi(string(got.Kvs[0].Value))
				}
				resp, err := cli.Txn(ctx).
					If(mutex.IsOwner()).
					Then(clientv3.OpPut(counter, strconv.Itoa(n+1))).Commit()
				if err != nil {
					fail(err.Error())
				}
				mu.Lock()
				if resp.Succeeded {
					total++
				} else {
					refused++
				}
				mu.Unlock()
				if err := mutex.Unlock(ctx); err != nil {
					fail(err.Error())
				}
			}
		}()
	}
	wg.Wait()
	say(map[string]any{"added": total, "refused": refused})
}

func newSession(cli *clientv3.Client, ttl int) *concurrency.Session {
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	if err != nil {
		fail(err.Error())
	}
	return session
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return -1
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// cpuTime is this process's user and system CPU time so far, in microseconds.
func cpuTime() int64 {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return usage.Utime.Sec*1e6 + usage.Utime.Usec + usage.Stime.Sec*1e6 + usage.Stime.Usec
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err.Error())
	}
	return n
}

var out = json.NewEncoder(os.Stdout)

func say(v map[string]any) {
	if err := out.Encode(v); err != nil {
		os.Exit(1)
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "peer:", message)
	os.Exit(1)
}
