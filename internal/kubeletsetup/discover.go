// Package kubeletsetup reads how the upstream kubelet is set up on a node
// (its command line, from the running process or from kubeadm's systemd
// unit and environment files) and reports what heartlet would do
// differently on that node with the same flags, configuration and root
// directory: flags and fields heartlet does not act on, feature gates,
// the cgroup driver against the runtime's, pods using pod fields heartlet
// refuses or does not honour, kubelet state files heartlet ignores, and
// image credential providers. heartlet validate --from-kubelet prints it.
package kubeletsetup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/heartlet/heartlet/internal/systemdunit"
)

// ErrNoKubelet is returned when no kubelet runs and no kubelet unit is
// installed.
var ErrNoKubelet = errors.New("no running kubelet process and no kubelet.service unit")

// Source is the kubelet's command line and where it was read.
type Source struct {
	// Program is the command (argv[0]); Args are its arguments.
	Program string
	Args    []string
	// From says where the command line was read: a process or the unit
	// files, in the order applied.
	From string
}

// Node reads a node's files under Root ("" or "/" is this machine; a
// directory stands for the node's / in tests).
type Node struct {
	Root string
	// Self is a process id that is never taken for the kubelet (heartlet
	// itself); 0 is none.
	Self int
}

// Path is p (an absolute path on the node) under Root.
func (n Node) Path(p string) string {
	root := filepath.Clean(n.Root)
	if n.Root == "" || root == "/" {
		return p
	}
	if p == root || strings.HasPrefix(p, root+"/") {
		return p // already under Root (a path made from another one)
	}
	return filepath.Join(root, p)
}

// maxCmdline bounds a process's command line read from /proc.
const maxCmdline = 1 << 20

// Discover returns the command line of the running kubelet, else the one
// its systemd unit would start.
func (n Node) Discover() (*Source, error) {
	src, err := n.FromProcess()
	if err != nil || src != nil {
		return src, err
	}
	return n.FromSystemd()
}

// FromProcess returns the command line of the process named kubelet (its
// /proc/<pid>/comm), the lowest pid when several are; nil when none runs.
func (n Node) FromProcess() (*Source, error) {
	proc := n.Path("/proc")
	entries, err := os.ReadDir(proc)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == n.Self {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue // gone, or another program
		}
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		path := filepath.Join(proc, strconv.Itoa(pid), "cmdline")
		data, err := readLimited(path, maxCmdline)
		if errors.Is(err, fs.ErrNotExist) {
			continue // ended meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("kubelet process %d: %w", pid, err)
		}
		words := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		if len(words) == 0 || words[0] == "" {
			continue // a zombie has no command line
		}
		return &Source{Program: words[0], Args: words[1:], From: fmt.Sprintf("running kubelet process %d (/proc/%d/cmdline)", pid, pid)}, nil
	}
	return nil, nil
}

// unitDirs are systemd's system unit directories, most important first.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// FromSystemd returns the command line systemd would start for
// kubelet.service: the unit file from the most important unit directory,
// then its drop-ins (kubelet.service.d/*.conf of every unit directory,
// ordered by file name, a name in a more important directory hiding the
// same name in others), the Environment= assignments and then the
// EnvironmentFile= files in order, and the ExecStart= command line
// expanded with them.
func (n Node) FromSystemd() (*Source, error) {
	unit := ""
	for _, d := range unitDirs {
		p := filepath.Join(d, "kubelet.service")
		if fi, err := os.Stat(n.Path(p)); err == nil && !fi.IsDir() {
			unit = p
			break
		}
	}
	dropIns := map[string]string{} // file name → path on the node
	for i := len(unitDirs) - 1; i >= 0; i-- {
		dir := filepath.Join(unitDirs[i], "kubelet.service.d")
		entries, err := os.ReadDir(n.Path(dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".conf") && !e.IsDir() {
				dropIns[e.Name()] = filepath.Join(dir, e.Name())
			}
		}
	}
	if unit == "" && len(dropIns) == 0 {
		return nil, ErrNoKubelet
	}
	var files []string
	if unit != "" {
		files = append(files, unit)
	}
	names := make([]string, 0, len(dropIns))
	for name := range dropIns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		files = append(files, dropIns[name])
	}
	var svc systemdunit.Service
	for _, f := range files {
		data, err := readLimited(n.Path(f), systemdunit.MaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("kubelet unit: %w", err)
		}
		if err := svc.Apply(f, data); err != nil {
			return nil, fmt.Errorf("kubelet unit: %w", err)
		}
	}
	switch len(svc.ExecStart) {
	case 0:
		return nil, fmt.Errorf("kubelet unit (%s): no ExecStart=", strings.Join(files, ", "))
	case 1:
	default:
		return nil, fmt.Errorf("kubelet unit (%s): %d ExecStart= lines, systemd starts a simple service with one", strings.Join(files, ", "), len(svc.ExecStart))
	}
	lists := [][]string{svc.Environment}
	read := append([]string(nil), files...)
	for _, ef := range svc.EnvironmentFiles {
		data, err := readLimited(n.Path(ef.Path), systemdunit.MaxFileSize)
		if errors.Is(err, fs.ErrNotExist) && ef.Optional {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kubelet unit: EnvironmentFile: %w", err)
		}
		env, err := systemdunit.ParseEnvironmentFile(ef.Path, data)
		if err != nil {
			return nil, fmt.Errorf("kubelet unit: EnvironmentFile: %w", err)
		}
		lists = append(lists, env)
		read = append(read, ef.Path)
	}
	words, err := systemdunit.Command(svc.ExecStart[0], systemdunit.Environment(lists...))
	if err != nil {
		return nil, fmt.Errorf("kubelet unit: ExecStart: %w", err)
	}
	return &Source{Program: words[0], Args: words[1:], From: "systemd unit " + strings.Join(read, ", ")}, nil
}

// readLimited reads a file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}
