package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/heartlet/heartlet/internal/errdefs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// LogFile is the log of one container instance.
type LogFile struct {
	// Path is the CRI log file.
	Path string
	// Running reports whether the instance still runs (and may write);
	// following ends once it does not. An error means the state is not
	// known (the runtime does not answer): following goes on, but ends
	// after maxRunningErrors such answers in a row. Nil means not running.
	Running func(ctx context.Context) (bool, error)
}

// LogLocator finds the log of a container of a pod: the current instance,
// or the previous one. Errors wrapping errdefs.ErrNotFound are answered 404,
// ErrBadRequest 400.
type LogLocator func(ctx context.Context, namespace, pod, container string, previous bool) (LogFile, error)

var (
	// ErrBadRequest marks a request that cannot be answered, such as the
	// previous instance of a container that has none.
	ErrBadRequest = errors.New("bad request")
)

// followPoll is how often a followed log is checked for new lines;
// runningEvery polls between checks that the container still runs.
// maxRunningErrors is how many failed running checks in a row end a
// follow, so a runtime that stays unreachable does not keep a request
// (and its goroutine) polling forever.
const (
	followPoll       = 250 * time.Millisecond
	runningEvery     = 4
	maxRunningErrors = 5
)

// LogOptions are the query options of /containerLogs that heartlet
// honours (v1.PodLogOptions).
type LogOptions struct {
	Follow     bool
	Previous   bool
	Timestamps bool
	TailLines  *int64
	LimitBytes *int64
	// SinceSeconds and SinceTime are exclusive.
	SinceSeconds *int64
	SinceTime    *time.Time
	// Stream is "", "All", "Stdout" or "Stderr".
	Stream string
}

// ParseLogOptions reads the query of a /containerLogs request as the
// kubelet does: v1.PodLogOptions parameters, with "tail" an alias of
// tailLines ("all" meaning every line); values are validated as the API
// server validates PodLogOptions.
func ParseLogOptions(q url.Values) (*LogOptions, error) {
	o := &LogOptions{}
	boolean := func(name string, dst *bool) error {
		vs, ok := q[name]
		if !ok || len(vs) == 0 {
			return nil
		}
		if vs[0] == "" {
			*dst = true
			return nil
		}
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", name, vs[0])
		}
		*dst = b
		return nil
	}
	integer := func(name string, min int64) (*int64, error) {
		v := q.Get(name)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an integer", name, v)
		}
		if n < min {
			return nil, fmt.Errorf("%s: must be greater than or equal to %d", name, min)
		}
		return &n, nil
	}
	for name, dst := range map[string]*bool{"follow": &o.Follow, "previous": &o.Previous, "timestamps": &o.Timestamps} {
		if err := boolean(name, dst); err != nil {
			return nil, err
		}
	}
	var err error
	tailName := "tailLines"
	if t := q.Get("tail"); t != "" {
		tailName = "tail"
		if t == "all" {
			tailName = ""
		}
	}
	if tailName != "" {
		// tailLines >= 0 (upstream ValidatePodLogOptions).
		if o.TailLines, err = integer(tailName, 0); err != nil {
			return nil, err
		}
	}
	// limitBytes and sinceSeconds >= 1 (upstream ValidatePodLogOptions).
	if o.LimitBytes, err = integer("limitBytes", 1); err != nil {
		return nil, err
	}
	if o.SinceSeconds, err = integer("sinceSeconds", 1); err != nil {
		return nil, err
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, fmt.Errorf("sinceTime: %q is not an RFC 3339 time", v)
		}
		o.SinceTime = &t
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		return nil, errors.New("at most one of sinceTime or sinceSeconds may be specified")
	}
	switch s := q.Get("stream"); s {
	case "", v1.LogStreamAll, v1.LogStreamStdout, v1.LogStreamStderr:
		o.Stream = s
	default:
		return nil, fmt.Errorf("stream: unsupported value %q", s)
	}
	if o.Stream != "" && o.Stream != v1.LogStreamAll && o.TailLines != nil {
		return nil, errors.New("tailLines is not supported when stream is not All")
	}
	return o, nil
}

// since is the earliest timestamp to show, or zero.
func (o *LogOptions) since(now time.Time) time.Time {
	switch {
	case o.SinceTime != nil:
		return *o.SinceTime
	case o.SinceSeconds != nil:
		return now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	return time.Time{}
}

// logsHandler serves /containerLogs/{namespace}/{pod}/{container}.
type logsHandler struct {
	locate LogLocator
	clock  clock.WithTicker
}

func (h *logsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET is allowed", http.StatusMethodNotAllowed)
		return
	}
	ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := ParseLogOptions(r.URL.Query())
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"message": "Invalid request: %s"}`, err), http.StatusBadRequest)
		return
	}
	f, err := h.locate(r.Context(), ns, pod, ctr, opts.Previous)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case errors.Is(err, ErrBadRequest):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	logger := klog.FromContext(r.Context()).WithValues("pod", klog.KRef(ns, pod), "container", ctr)
	if err := ReadLog(klog.NewContext(r.Context(), logger), f, opts, fw, h.clock); err != nil && r.Context().Err() == nil {
		logger.Error(err, "Failed to read container log", "path", f.Path)
	}
}

// flushWriter flushes after every write, so followed lines reach the
// client at once.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		_ = f.rc.Flush()
	}
	return n, err
}

// criLine is one parsed CRI log line.
type criLine struct {
	ts      time.Time
	stream  string
	partial bool
	msg     []byte
}

// parseCRILine parses "<RFC3339Nano> <stream> <P|F> <msg>".
func parseCRILine(line []byte) (criLine, error) {
	var l criLine
	line = bytes.TrimSuffix(line, []byte("\n"))
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return l, errors.New("no timestamp")
	}
	ts, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return l, fmt.Errorf("timestamp: %w", err)
	}
	l.ts = ts
	line = line[i+1:]
	i = bytes.IndexByte(line, ' ')
	if i < 0 {
		return l, errors.New("no stream")
	}
	l.stream = string(line[:i])
	if l.stream != "stdout" && l.stream != "stderr" {
		return l, fmt.Errorf("unknown stream %q", l.stream)
	}
	line = line[i+1:]
	// The tag field is ':'-separated; its first tag is P (partial) or F.
	tag, rest, _ := bytes.Cut(line, []byte(" "))
	first, _, _ := bytes.Cut(tag, []byte(":"))
	switch string(first) {
	case "P":
		l.partial = true
	case "F":
	default:
		return l, fmt.Errorf("unknown tag %q", tag)
	}
	l.msg = rest
	return l, nil
}

// logWriter applies the stream, since, timestamps and limit options.
type logWriter struct {
	w      io.Writer
	opts   *LogOptions
	since  time.Time
	remain int64 // bytes left with limitBytes, -1 without
}

var errLimitReached = errors.New("limit reached")

func (lw *logWriter) write(l criLine) error {
	if lw.opts.Stream != "" && lw.opts.Stream != v1.LogStreamAll && !equalFoldStream(lw.opts.Stream, l.stream) {
		return nil
	}
	if !lw.since.IsZero() && l.ts.Before(lw.since) {
		return nil
	}
	var buf []byte
	if lw.opts.Timestamps {
		buf = append(buf, l.ts.Format(time.RFC3339Nano)...)
		buf = append(buf, ' ')
	}
	buf = append(buf, l.msg...)
	if !l.partial {
		buf = append(buf, '\n')
	}
	limited := false
	if lw.remain >= 0 && int64(len(buf)) >= lw.remain {
		buf, limited = buf[:lw.remain], true
	}
	if _, err := lw.w.Write(buf); err != nil {
		return err
	}
	if lw.remain >= 0 {
		lw.remain -= int64(len(buf))
	}
	if limited {
		return errLimitReached
	}
	return nil
}

func equalFoldStream(want, stream string) bool {
	return (want == v1.LogStreamStdout && stream == "stdout") || (want == v1.LogStreamStderr && stream == "stderr")
}

// tailOffset returns the offset of the first of the last n lines of f.
func tailOffset(f *os.File, n int64) (int64, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	ring := make([]int64, 0, min(n, 1<<16))
	start := 0
	var off int64
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) > 0 && (err == nil || errors.Is(err, bufio.ErrBufferFull)) {
			if err == nil && n > 0 {
				if int64(len(ring)) < n {
					ring = append(ring, off)
				} else {
					ring[start] = off
					start = (start + 1) % len(ring)
				}
			}
		}
		off += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			// a long line: count it once, at its start
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				off += int64(len(line))
			}
		}
		if err != nil {
			break
		}
	}
	if n == 0 || len(ring) == 0 {
		return off, nil
	}
	return ring[start], nil
}

// ReadLog writes the log of f to w with opts, as the kubelet reads CRI
// logs: lines parsed and unparsable ones skipped, partial lines joined,
// timestamps on request, tailLines counted from the end of the file,
// since and limitBytes applied. With Follow it keeps reading new lines,
// reopens the file when it is replaced (rotation), and returns once the
// container no longer runs and the file has been read to its end, or ctx
// is done.
func ReadLog(ctx context.Context, f LogFile, opts *LogOptions, w io.Writer, clk clock.WithTicker) error {
	logger := klog.FromContext(ctx)
	file, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("open log %s: %w", f.Path, err)
	}
	defer func() { file.Close() }()
	var start int64
	if opts.TailLines != nil {
		if start, err = tailOffset(file, *opts.TailLines); err != nil {
			return fmt.Errorf("read log %s: %w", f.Path, err)
		}
	}
	if _, err := file.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("read log %s: %w", f.Path, err)
	}
	lw := &logWriter{w: w, opts: opts, since: opts.since(clk.Now()), remain: -1}
	if opts.LimitBytes != nil {
		lw.remain = *opts.LimitBytes
	}
	r := bufio.NewReader(file)
	var pending []byte // an incomplete last line, waiting for its end
	// drain reads every complete line available.
	drain := func() (bool, error) {
		read := false
		for {
			chunk, err := r.ReadBytes('\n')
			if len(chunk) > 0 {
				pending = append(pending, chunk...)
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					return read, nil
				}
				return read, err
			}
			read = true
			l, perr := parseCRILine(pending)
			pending = pending[:0]
			if perr != nil {
				logger.V(4).Info("Skipping unparsable log line", "path", f.Path, "err", perr)
				continue
			}
			if err := lw.write(l); err != nil {
				return read, err
			}
		}
	}
	polls, runErrs := 0, 0
	for {
		read, err := drain()
		if errors.Is(err, errLimitReached) {
			return nil
		}
		if err != nil {
			return err
		}
		if !opts.Follow {
			return nil
		}
		if read {
			polls = 0
		}
		if !read {
			// Rotation: the path now names another file.
			if fi, err := os.Stat(f.Path); err == nil {
				if cur, err := file.Stat(); err == nil && !os.SameFile(fi, cur) {
					nf, err := os.Open(f.Path)
					if err == nil {
						if _, err := drain(); err != nil && !errors.Is(err, errLimitReached) {
							nf.Close()
							return err
						}
						file.Close()
						file, r, pending = nf, bufio.NewReader(nf), nil
						continue
					}
				}
			}
			polls++
			// Checked at the first idle poll (a finished container ends at
			// once) and every runningEvery polls after.
			if (polls-1)%runningEvery == 0 {
				running, rerr := false, error(nil)
				if f.Running != nil {
					running, rerr = f.Running(ctx)
				}
				switch {
				case rerr != nil && ctx.Err() != nil:
					return nil
				case rerr != nil:
					runErrs++
					if runErrs >= maxRunningErrors {
						return fmt.Errorf("follow log %s: container state unknown %d times in a row: %w", f.Path, runErrs, rerr)
					}
					logger.V(2).Info("Container state unknown while following its log", "path", f.Path, "err", rerr)
				case !running:
					// The instance ended: what it wrote last is in the file.
					_, err := drain()
					if errors.Is(err, errLimitReached) {
						return nil
					}
					return err
				default:
					runErrs = 0
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(followPoll):
		}
	}
}
