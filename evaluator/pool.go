package evaluator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/templates"
)

// Defaults of Options.
const (
	DefaultProcesses   = 3
	DefaultMemoryBytes = 512 << 20
)

// Niceness is the scheduling niceness of every evaluator process, the
// lowest there is: where the CPU is contended, the kernel gives a nice-19
// thread about a seventieth of what it gives one of the engine's (CFS
// weights 15 and 1024), so evaluations that run away, or a flood of
// webhook requests, yield the CPU to the engine's reconciles and to the
// node's other processes, and run at full speed on an idle CPU. (At
// niceness 10, weight 110, a flood of conversions still slowed a batch of
// new parents by 1.8x on two loaded cores; at 19, not measurably.)
const Niceness = 19

// Options size a Pool.
type Options struct {
	// Processes bounds the evaluator processes running at once. Zero:
	// DefaultProcesses.
	Processes int
	// MemoryBytes is each process's resident memory past which it is
	// killed, and its evaluation refused (a *LimitError). The process's
	// Go runtime is told three quarters of it as its GOMEMLIMIT. Zero:
	// DefaultMemoryBytes.
	MemoryBytes uint64
	// TotalBytes bounds the memory the engine's process and its
	// evaluator processes hold together, as the kernel counts it for the
	// OOM killer (resident sets): `engine run` sets it below the
	// container's memory limit, so that the kernel never kills the
	// container, the engine with it, for an evaluation. Past it, idle
	// processes are stopped first; then the busy process holding the most
	// is stopped and its evaluation refused (a *LimitError, Total), if it
	// holds more than its share (TotalBytes over Processes+1): below that
	// the engine itself holds the memory, and the engine's own bounds
	// apply. Zero: no such bound.
	TotalBytes uint64
	// PerKind bounds the processes the evaluations of one kind hold at
	// once, so one kind's runaways leave the others a process; PerNamespace
	// those of one kind in one namespace, so one tenant's leave the kind's
	// other tenants one. Zero: Processes-1 and PerKind-1, at least 1.
	PerKind, PerNamespace int
	// Command is the process to run: the path and its arguments. Nil:
	// this executable, with the argument "evaluator" (`engine
	// evaluator`, which calls Serve).
	Command []string
}

func (o Options) withDefaults() Options {
	if o.Processes <= 0 {
		o.Processes = DefaultProcesses
	}
	if o.MemoryBytes == 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.PerKind <= 0 {
		o.PerKind = max(1, o.Processes-1)
	}
	if o.PerNamespace <= 0 {
		o.PerNamespace = max(1, o.PerKind-1)
	}
	return o
}

// Key names whose evaluation a request is, for the pool's shares: the
// parent's kind (group and kind) and namespace.
type Key struct {
	Kind      string
	Namespace string
}

// LimitError is an evaluation the pool stopped: past its timeout, or past
// the process's memory. The process was killed; nothing of the evaluation
// remains.
type LimitError struct {
	// Memory: past Options.MemoryBytes, or with Total past
	// Options.TotalBytes; else past the timeout.
	Memory, Total bool
	Timeout       time.Duration
	// Bytes is the limit passed: the process's (Options.MemoryBytes) or,
	// with Total, the engine's and its processes' together.
	Bytes uint64
	// Held is what the process held when it was stopped for memory.
	Held uint64
	// Answered is, in a batch, how many objects were answered before the
	// one stopped.
	Answered int
}

func (e *LimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("the engine and its evaluator processes held more than %d MiB together (--evaluator-total-memory), and this evaluation, holding the most (%d MiB), was stopped", e.Bytes>>20, e.Held>>20)
	}
	if e.Memory {
		return fmt.Sprintf("the evaluation held more than %d MiB (--evaluator-memory) and was stopped", e.Bytes>>20)
	}
	return fmt.Sprintf("the evaluation took longer than %s (--evaluation-timeout) and was stopped", e.Timeout)
}

// BusyError: no process was free for the request while its context
// lasted; nothing was evaluated, and the request may be made again.
type BusyError struct {
	Key      Key
	Reason   string
	Capacity int
	// Full: every process was busy with others' evaluations; else the
	// key's kind or namespace held all the processes it may.
	Full bool
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("no evaluator process was free: %s (%d)", e.Reason, e.Capacity)
}

// Pool runs evaluations in processes of their own, where one that runs
// away can be stopped: CUE cannot interrupt an evaluation in process, so
// one past the timeout would keep its CPU and memory to its end. A process
// is killed at the timeout or past its memory, and another started in its
// place; processes are reused while they end their evaluations within the
// limits. A Pool is safe for concurrent use; Close stops its processes and
// waits for them.
type Pool struct {
	opts Options

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a share is given back
	busy    int
	kinds   map[string]int
	spaces  map[Key]int
	idle    []*process
	all     map[*process]struct{}
	self    *Resident // the engine's resident set, with TotalBytes
	closed  bool
	wg      sync.WaitGroup // the processes' waiters
}

// New returns a pool; it starts processes when they are first needed.
func New(opts Options) *Pool {
	p := &Pool{opts: opts.withDefaults(), changed: make(chan struct{}), kinds: map[string]int{}, spaces: map[Key]int{}, all: map[*process]struct{}{}}
	if p.opts.TotalBytes > 0 {
		p.self = OpenResident("self")
	}
	return p
}

// Options returns the pool's options, defaults filled in.
func (p *Pool) Options() Options { return p.opts }

// Evaluate evaluates t for in in a process: ctx bounds the wait for one
// (a *BusyError when it ends first), timeout the evaluation once it runs
// (a *LimitError past it or past the memory). An evaluation's own error
// is the template's, as Template.Evaluate returns it (a *templates.Error
// with its positions and paths).
func (p *Pool) Evaluate(ctx context.Context, key Key, timeout time.Duration, t *templates.Template, in templates.Input) (*templates.Result, error) {
	req, err := newRequest(opEvaluate, t, in.Parent)
	if err != nil {
		return nil, err
	}
	if in.Observed != nil {
		if req.Observed, err = json.Marshal(in.Observed); err != nil {
			return nil, fmt.Errorf("encoding the observed state: %w", err)
		}
	}
	resps, err := p.do(ctx, key, timeout, t, req)
	if err != nil {
		return nil, err
	}
	resp := resps[0]
	if resp.Result == nil {
		return nil, errors.New("evaluator: a response with neither result nor error")
	}
	return resp.Result.result()
}

// Convert is Template.Convert in a process of objects as JSON (raws),
// all of one template, into JSON: the conversion webhook's, which reads
// and writes JSON, decodes and encodes nothing more. The objects go in one
// request, each bounded as one evaluation is; the first that fails ends
// it, its error returned with the index of the object (all the
// conversions before it returned too).
func (p *Pool) Convert(ctx context.Context, key Key, timeout time.Duration, t *templates.Template, raws [][]byte, to string) ([][]byte, int, error) {
	req := &request{Op: opConvert, Path: t.Path, Hash: t.Hash, To: to, Objects: make([]json.RawMessage, len(raws))}
	for i, raw := range raws {
		req.Objects[i] = raw
	}
	resps, err := p.do(ctx, key, timeout, t, req)
	out := make([][]byte, 0, len(raws))
	for _, resp := range resps {
		if resp.Error == nil {
			out = append(out, resp.Object)
		}
	}
	if le := (*LimitError)(nil); errors.As(err, &le) {
		return out, le.Answered, err
	}
	if err != nil {
		return out, len(out), err
	}
	if len(out) != len(raws) {
		return out, len(out), errors.New("evaluator: a response with neither object nor error")
	}
	return out, len(out), nil
}

// ValidateParent is Template.ValidateParent in a process, bounded as
// Evaluate is.
func (p *Pool) ValidateParent(ctx context.Context, key Key, timeout time.Duration, t *templates.Template, obj *unstructured.Unstructured) error {
	req, err := newRequest(opValidate, t, obj)
	if err != nil {
		return err
	}
	_, err = p.do(ctx, key, timeout, t, req)
	return err
}

func newRequest(op string, t *templates.Template, obj *unstructured.Unstructured) (*request, error) {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding the object: %w", err)
	}
	return &request{Op: op, Path: t.Path, Hash: t.Hash, Parent: raw}, nil
}

// do runs req in a process of the pool: its response, or a batch's.
func (p *Pool) do(ctx context.Context, key Key, timeout time.Duration, t *templates.Template, req *request) ([]*response, error) {
	if err := p.acquire(ctx, key); err != nil {
		return nil, err
	}
	defer p.release(key)
	proc, err := p.process()
	if err != nil {
		return nil, err
	}
	resps, err := proc.run(req, t, timeout)
	p.put(proc)
	if err != nil {
		return nil, err
	}
	if last := resps[len(resps)-1]; last.Error != nil {
		return resps, last.Error.err()
	}
	return resps, nil
}

// acquire takes a share for key: a process of the pool, within the
// kind's and the namespace's, waiting while ctx lasts.
func (p *Pool) acquire(ctx context.Context, key Key) error {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errors.New("the evaluator pool is closed")
		}
		why, capacity, full := "", 0, false
		switch {
		case p.kinds[key.Kind] >= p.opts.PerKind:
			why, capacity = "the evaluations of "+key.Kind+" hold all the processes it may (--evaluator-processes less one)", p.opts.PerKind
		case p.spaces[key] >= p.opts.PerNamespace:
			why, capacity = "the evaluations of "+key.Kind+" in namespace "+key.Namespace+" hold all the processes they may", p.opts.PerNamespace
		case p.busy >= p.opts.Processes:
			why, capacity, full = "every process is busy (--evaluator-processes)", p.opts.Processes, true
		}
		if why == "" {
			p.busy++
			p.kinds[key.Kind]++
			p.spaces[key]++
			p.mu.Unlock()
			return nil
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return &BusyError{Key: key, Reason: why, Capacity: capacity, Full: full}
		}
	}
}

func (p *Pool) release(key Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy--
	if p.kinds[key.Kind]--; p.kinds[key.Kind] == 0 {
		delete(p.kinds, key.Kind)
	}
	if p.spaces[key]--; p.spaces[key] == 0 {
		delete(p.spaces, key)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// process returns an idle process, or starts one.
func (p *Pool) process() (*process, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		proc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		proc.idling = false
		p.mu.Unlock()
		return proc, nil
	}
	p.mu.Unlock()
	proc, err := p.start()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		proc.kill()
		return nil, errors.New("the evaluator pool is closed")
	}
	p.all[proc] = struct{}{}
	return proc, nil
}

// put gives a process back: idle if it is alive, forgotten if not.
func (p *Pool) put(proc *process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if proc.dead() || p.closed {
		proc.kill()
		delete(p.all, proc)
		return
	}
	proc.idling = true
	p.idle = append(p.idle, proc)
}

// overTotal says whether proc, busy, is to be stopped for the memory the
// engine and its processes hold together (Options.TotalBytes): past it,
// the idle processes are stopped first (and the busy ones spared until a
// read finds the total past it again), then the busy one holding the most
// if it holds more than its share. It returns the total.
func (p *Pool) overTotal(proc *process) (bool, uint64) {
	if p.self == nil {
		return false, 0
	}
	total, ok := p.self.Bytes()
	if !ok {
		return false, 0
	}
	p.mu.Lock()
	var largest *process
	for q := range p.all {
		held := q.held.Load()
		total += held
		if !q.idling && (largest == nil || held > largest.held.Load()) {
			largest = q
		}
	}
	if total <= p.opts.TotalBytes {
		p.mu.Unlock()
		return false, total
	}
	idle := p.idle
	p.idle = nil
	for _, q := range idle {
		delete(p.all, q)
	}
	p.mu.Unlock()
	for _, q := range idle {
		q.kill()
	}
	if len(idle) > 0 {
		return false, total
	}
	share := p.opts.TotalBytes / uint64(p.opts.Processes+1)
	return largest == proc && proc.held.Load() > share, total
}

// Start runs until ctx ends, then closes the pool: the pool as a
// controller-runtime Runnable.
func (p *Pool) Start(ctx context.Context) error {
	<-ctx.Done()
	p.Close()
	return nil
}

// NeedLeaderElection is false: every replica may evaluate (the webhooks'
// conversions), and each closes its own pool.
func (p *Pool) NeedLeaderElection() bool { return false }

// Close kills the pool's processes and waits for them.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	for proc := range p.all {
		proc.kill()
	}
	p.idle = nil
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	p.wg.Wait()
	if p.self != nil {
		p.self.Close()
	}
}

// start starts a process.
func (p *Pool) start() (*process, error) {
	command := p.opts.Command
	if command == nil {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("starting an evaluator process: %w", err)
		}
		command = []string{self, "evaluator"}
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(withoutRuntimeTuning(os.Environ()),
		"GOMEMLIMIT="+strconv.FormatUint(p.opts.MemoryBytes/4*3, 10),
		"GOMAXPROCS=1") // an evaluation is one goroutine: a runaway takes one core
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting an evaluator process (%s): %w", command[0], err)
	}
	proc := &process{pool: p, memory: p.opts.MemoryBytes, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), dec: json.NewDecoder(bufio.NewReaderSize(stdout, 1<<16)),
		rss: OpenResident(strconv.Itoa(cmd.Process.Pid)), known: map[string]bool{}, exited: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		proc.waitErr = cmd.Wait()
		close(proc.exited)
		proc.rss.Close()
	}()
	return proc, nil
}

// withoutRuntimeTuning drops the engine's own GOMEMLIMIT and GOMAXPROCS,
// which are the engine's, not an evaluator's.
func withoutRuntimeTuning(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOMAXPROCS=") {
			out = append(out, kv)
		}
	}
	return out
}

// process is one evaluator process; one request at a time.
type process struct {
	pool    *Pool
	memory  uint64 // resident bytes past which it is killed
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *json.Encoder
	dec     *json.Decoder
	rss     *Resident       // its resident set, opened once
	known   map[string]bool // template hashes the process holds
	exited  chan struct{}   // closed once it exited
	waitErr error           // how it exited; read after exited
	broken  bool            // its pipe failed: not reused
	held    atomic.Uint64   // its resident set at the last read
	idling  bool            // in the pool's idle list; under the pool's mu
}

func (proc *process) dead() bool {
	if proc.broken {
		return true
	}
	select {
	case <-proc.exited:
		return true
	default:
		return false
	}
}

func (proc *process) kill() {
	_ = proc.cmd.Process.Kill()
	_ = proc.stdin.Close()
}

// loadTimeout bounds a process's compile of a template it is sent: not
// the evaluation's timeout, which starts once the template is there.
const loadTimeout = 2 * time.Minute

// run sends req and waits for its responses (exchange), each for at
// most timeout and while the process holds at most its memory (and the
// pool's total allows); past either the process is killed. A template the process does not hold yet
// is sent first, and compiled within loadTimeout.
func (proc *process) run(req *request, t *templates.Template, timeout time.Duration) ([]*response, error) {
	if !proc.known[req.Hash] {
		load := &request{Op: opLoad, Path: req.Path, Hash: req.Hash, Files: t.Files()}
		resps, err := proc.exchange(load, loadTimeout)
		if err != nil {
			return nil, err
		}
		if resps[0].Error != nil {
			return resps, nil
		}
		proc.known[req.Hash] = true
	}
	return proc.exchange(req, timeout)
}

// exchange sends req and reads its responses: one, or one per object of
// a batch (req.Objects) until one that is an error, which ends it. Each
// response is bounded by timeout from the one before, so a batch gives
// each object the time one evaluation has; a process past it is killed,
// and the error (a *LimitError) is the object's after those answered.
func (proc *process) exchange(req *request, timeout time.Duration) ([]*response, error) {
	type answer struct {
		resp *response
		err  error
	}
	want := max(1, len(req.Objects))
	answers := make(chan answer, want)
	done := make(chan struct{})
	go func() { // ends when the process answers, or is killed
		defer close(done)
		if err := proc.enc.Encode(req); err != nil {
			answers <- answer{err: err}
			return
		}
		for range want {
			var resp response
			err := proc.dec.Decode(&resp)
			answers <- answer{&resp, err}
			if err != nil || resp.Error != nil {
				return
			}
		}
	}()
	var timer <-chan time.Time
	var tm *time.Timer
	if timeout > 0 {
		tm = time.NewTimer(timeout)
		defer tm.Stop()
		timer = tm.C
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var stopped *LimitError
	resps := make([]*response, 0, want)
	for stopped == nil {
		select {
		case a := <-answers:
			if a.err != nil {
				proc.broken = true
				proc.kill()
				<-proc.exited
				return nil, fmt.Errorf("the evaluator process failed (%v): %w", proc.waitErr, a.err)
			}
			resps = append(resps, a.resp)
			if len(resps) == want || a.resp.Error != nil {
				<-done
				return resps, nil
			}
			if tm != nil {
				tm.Reset(timeout)
			}
		case <-timer:
			stopped = &LimitError{Timeout: timeout, Answered: len(resps)}
		case <-tick.C:
			held, ok := proc.rss.Bytes()
			if !ok {
				continue
			}
			proc.held.Store(held)
			if held > proc.memory {
				stopped = &LimitError{Memory: true, Bytes: proc.memory, Held: held, Answered: len(resps)}
			} else if over, _ := proc.pool.overTotal(proc); over {
				stopped = &LimitError{Memory: true, Total: true, Bytes: proc.pool.opts.TotalBytes, Held: held, Answered: len(resps)}
			}
		}
	}
	proc.broken = true
	proc.kill()
	<-done // the pipe ends with the process
	<-proc.exited
	return nil, stopped
}
