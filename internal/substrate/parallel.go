package substrate

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellisnet/trellis/internal/logline"
)

// workers is how many creations run at once. Creating nodes and links is mostly waiting on the
// kernel (process start, RTNL), so a few per core keeps both cores busy.
var workers = 4 * runtime.NumCPU()

// parallel runs f(0..n-1) on the worker pool and returns the first error. After an error no
// new item starts; items already running finish.
func parallel(n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil || next >= n {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, ok := take(); ok; i, ok = take() {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// parallelShown is parallel, telling log's handler how far it is every tenth of a second if
// it is a logline.Progresser (a terminal's progress line).
func parallelShown(log *slog.Logger, step string, n int, f func(i int) error) error {
	p, ok := log.Handler().(logline.Progresser)
	if !ok || n < 2 {
		return parallel(n, f)
	}
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			p.Progress(step, int(done.Load()), n)
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	})
	err := parallel(n, func(i int) error {
		defer done.Add(1)
		return f(i)
	})
	close(stop)
	wg.Wait()
	p.Progress(step, int(done.Load()), n)
	return err
}
