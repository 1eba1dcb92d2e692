package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	logName  = "redis.log"
	confName = "redis.conf"

	// readyTimeout bounds how long a process may take to answer.
	readyTimeout = 15 * time.Second
	// startAttempts is how often a new server tries fresh ports when the
	// ones it picked were taken in the meantime.
	startAttempts = 5
)

// errPortInUse marks a start that failed because a port was taken.
var errPortInUse = errors.New("port already in use")

// Redis is one redis-server process (or a Sentinel) listening on 127.0.0.1.
// Its directory, port and configuration stay the same across Stop and
// Start. Its methods are safe for concurrent use.
type Redis struct {
	bin     string
	cfg     RedisConfig
	dir     string
	port    int
	tlsPort int
	admin   *redis.Client

	mu     sync.Mutex
	proc   *Process // nil when not running
	paused bool
}

// RedisConfig says what kind of redis-server StartRedis runs. The zero
// value is a standalone server configured as rate limit state wants it: no
// persistence, noeviction.
type RedisConfig struct {
	// Cluster turns cluster mode on, with NodeTimeout as
	// cluster-node-timeout.
	Cluster     bool
	NodeTimeout time.Duration
	// Sentinel runs a Sentinel instead of a data server.
	Sentinel bool
	// TLS, when not nil, makes the server serve TLS on TLSAddr besides
	// plain TCP on Addr.
	TLS *TLSFiles
	// Directives are extra lines of the configuration file.
	Directives []string
	// Args are extra command-line options, after the configuration file
	// ("--maxmemory-policy", "noeviction"); they must not set the port.
	Args []string
	// Path lists the directories to look for redis-server in, as PATH
	// does; empty means PATH.
	Path string
}

// TLSFiles names the PEM files a redis-server serves TLS with.
type TLSFiles struct {
	// CertFile and KeyFile hold the server's certificate and private key.
	CertFile, KeyFile string
	// CAFile holds the CA that client certificates must chain to. It is
	// required when AuthClients is set.
	CAFile string
	// AuthClients makes the server demand a client certificate.
	AuthClients bool
}

// StartRedis starts a redis-server as cfg says, in a new directory of its
// own, on free loopback ports, and waits until it answers. When a port it
// picked is taken before the server binds it, it tries new ones. The error
// wraps ErrNotInstalled when redis-server is not in PATH (or cfg.Path), and
// ErrNoTLS when cfg asks for TLS that it was built without. Close stops the
// server for good.
func StartRedis(cfg RedisConfig) (*Redis, error) {
	bin, err := LookPathIn(cfg.Path, "redis-server", "apt-get install redis-server")
	if err != nil {
		return nil, err
	}
	major, err := serverMajor(bin)
	if err != nil {
		return nil, err
	}
	nports := 1
	if cfg.TLS != nil {
		nports = 2
	}
	for attempt := 1; ; attempt++ {
		s, err := startRedisOnce(bin, major, cfg, nports)
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return s, err
		}
	}
}

// startRedisOnce makes one attempt of StartRedis, on new ports in a new
// directory; it returns an error that wraps errPortInUse when a port was
// taken.
func startRedisOnce(bin string, major int, cfg RedisConfig, nports int) (*Redis, error) {
	ports, err := reservePorts(nports, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redis-")
	if err != nil {
		releasePorts(ports...)
		return nil, fmt.Errorf("proc: %w", err)
	}
	s := &Redis{bin: bin, cfg: cfg, dir: dir, port: ports[0]}
	if cfg.TLS != nil {
		s.tlsPort = ports[1]
	}
	err = os.WriteFile(filepath.Join(dir, confName), []byte(s.config(major)), 0o600)
	if err == nil {
		err = s.Start()
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.admin = redis.NewClient(&redis.Options{
		Addr:                     s.Addr(),
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		ContextTimeoutEnabled:    true,
		DialTimeout:              time.Second,
		ReadTimeout:              5 * time.Second,
		MaxRetries:               -1,
		PoolSize:                 4,
	})
	return s, nil
}

// ErrNoTLS reports that the installed redis-server was built without TLS.
var ErrNoTLS = errors.New("redis-server does not support TLS")

// config returns the server's configuration file.
func (s *Redis) config(major int) string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	line("port %d", s.port)
	line("bind 127.0.0.1")
	line("protected-mode no")
	line("daemonize no")
	line("dir %s", strconv.Quote(s.dir))
	line("logfile %s", strconv.Quote(filepath.Join(s.dir, logName)))
	if !s.cfg.Sentinel {
		line(`save ""`)
		line("appendonly no")
		line("maxmemory-policy noeviction")
		// A replica's first sync must not wait for more replicas to arrive.
		line("repl-diskless-sync yes")
		line("repl-diskless-sync-delay 0")
		if major >= 7 {
			line("enable-debug-command yes")
			// Do not wait for lagging replicas on SIGTERM.
			line("shutdown-on-sigterm nosave now")
		}
	}
	if s.cfg.Cluster {
		line("cluster-enabled yes")
		line("cluster-config-file nodes.conf")
		line("cluster-node-timeout %d", s.cfg.NodeTimeout.Milliseconds())
		// A replica may always take over, however long its master was gone.
		line("cluster-replica-validity-factor 0")
	}
	if f := s.cfg.TLS; f != nil {
		line("tls-port %d", s.tlsPort)
		line("tls-cert-file %s", strconv.Quote(f.CertFile))
		line("tls-key-file %s", strconv.Quote(f.KeyFile))
		if f.CAFile != "" {
			line("tls-ca-cert-file %s", strconv.Quote(f.CAFile))
		}
		if f.AuthClients {
			line("tls-auth-clients yes")
		} else {
			line("tls-auth-clients no")
		}
	}
	for _, d := range s.cfg.Directives {
		line("%s", d)
	}
	return b.String()
}

// String names the server by kind and address, for messages.
func (s *Redis) String() string {
	kind := "redis-server"
	if s.cfg.Sentinel {
		kind = "redis-sentinel"
	}
	return kind + " " + s.Addr()
}

// Addr returns the server's plain TCP address, "127.0.0.1:port".
func (s *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Addrs returns the plain TCP addresses of servers, in their order.
func Addrs(servers []*Redis) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Port returns the server's plain TCP port.
func (s *Redis) Port() int { return s.port }

// TLSAddr returns the address on which the server speaks TLS, or "" when it
// does not.
func (s *Redis) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// Dir returns the server's working directory, which holds its configuration
// (redis.conf) and its log (redis.log).
func (s *Redis) Dir() string { return s.dir }

// NewClient returns a go-redis client for the server's plain TCP address;
// the caller closes it. Like ratewarden's own client it honours context
// deadlines, speaks RESP2 and sends no CLIENT SETINFO.
func (s *Redis) NewClient() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     s.Addr(),
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// Pid returns the process id of the server, or 0 when it is not running.
func (s *Redis) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// Running reports whether the server's process is running (paused or not).
func (s *Redis) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Start starts the server's process again after Stop or Kill, on the same
// port, with the same directory and configuration, and waits until it
// answers. A cluster node rejoins its cluster. Start fails if the
// process is already running or does not come up; the error then includes
// the end of the server's output and log.
func (s *Redis) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return fmt.Errorf("proc: %s is already running", s)
	}
	args := []string{filepath.Join(s.dir, confName)}
	if s.cfg.Sentinel {
		args = append(args, "--sentinel")
	}
	p, err := Start(Command{Name: s.String(), Bin: s.bin, Args: append(args, s.cfg.Args...), Dir: s.dir})
	if err != nil {
		return err
	}
	if err := waitReady(s.Addr(), p.Pid(), p.Exited()); err != nil {
		p.Kill()
		tail := s.logTail(p)
		if strings.Contains(tail, "already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		if s.cfg.TLS != nil && (strings.Contains(tail, "not built with TLS") || strings.Contains(tail, "Bad directive")) {
			err = fmt.Errorf("%w: %w", ErrNoTLS, err)
		}
		return fmt.Errorf("proc: start %s: %w; end of its output:\n%s", s, err, tail)
	}
	s.proc, s.paused = p, false
	return nil
}

// waitReady polls addr until the server with process id pid answers INFO,
// its process exits, or readyTimeout passes. The process id tells the
// server from another that may hold the port.
func waitReady(addr string, pid int, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{
		Addr:                     addr,
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		DialTimeout:              250 * time.Millisecond,
		ReadTimeout:              time.Second,
		MaxRetries:               -1,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for {
		info, err := c.Info(ctx, "server").Result()
		if err == nil && !strings.Contains(info, fmt.Sprintf("process_id:%d\r\n", pid)) {
			err = fmt.Errorf("another process answers on %s", addr)
		}
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("no answer within %v: %w", readyTimeout, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Stop shuts the server down with SIGTERM (resuming it first if paused) and
// waits for it to exit, killing it if it takes longer than 10 seconds.
// Nothing is persisted, so its data is gone. Stop does nothing when the
// server is not running.
func (s *Redis) Stop() {
	s.ifRunning(func(p *Process) {
		p.Stop()
		s.proc, s.paused = nil, false
	})
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it to
// exit. Kill does nothing when the server is not running.
func (s *Redis) Kill() {
	s.ifRunning(func(p *Process) {
		p.Kill()
		s.proc, s.paused = nil, false
	})
}

// Pause freezes the server with SIGSTOP: it keeps its connections but answers
// nothing, like a server stalled by the operating system or the network.
// Pause does nothing when the server is not running.
func (s *Redis) Pause() {
	s.ifRunning(func(p *Process) {
		p.Signal(syscall.SIGSTOP)
		s.paused = true
	})
}

// Resume lets a paused server run again with SIGCONT. Resume does nothing
// when the server is not running.
func (s *Redis) Resume() {
	s.ifRunning(func(p *Process) {
		p.Signal(syscall.SIGCONT)
		s.paused = false
	})
}

// ifRunning calls f with the server's process, holding the server's lock,
// when it is running.
func (s *Redis) ifRunning(f func(p *Process)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		f(s.proc)
	}
}

// answering reports whether the server runs and is not paused.
func (s *Redis) answering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.paused
}

// Close kills the server for good and removes its directory.
func (s *Redis) Close() {
	s.Kill()
	if s.admin != nil {
		_ = s.admin.Close()
	}
	_ = os.RemoveAll(s.dir)
	releasePorts(s.port, s.tlsPort)
}

// logTail returns the last lines of p's output and of the server's log.
func (s *Redis) logTail(p *Process) string {
	var b strings.Builder
	if out := p.Tail(25); out != "" {
		fmt.Fprintf(&b, "--- output ---\n%s\n", out)
	}
	if data, err := os.ReadFile(filepath.Join(s.dir, logName)); err == nil && len(data) > 0 {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", logName, lastLines(string(data), 25))
	}
	if b.Len() == 0 {
		return "(empty)"
	}
	return b.String()
}

// Info returns the fields of INFO section, such as "redis_version" of
// "server" or "role" of "replication".
func (s *Redis) Info(ctx context.Context, section string) (map[string]string, error) {
	return s.fields(ctx, "INFO", section)
}

// Do runs one command on the server through a client of its own.
func (s *Redis) Do(ctx context.Context, args ...any) (any, error) {
	v, err := s.admin.Do(ctx, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("proc: %s: %v: %w", s, args, err)
	}
	return v, nil
}

// fields runs a command that answers "name:value" lines (INFO, CLUSTER INFO)
// and returns them as a map.
func (s *Redis) fields(ctx context.Context, args ...any) (map[string]string, error) {
	v, err := s.Do(ctx, args...)
	if err != nil {
		return nil, err
	}
	text, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("proc: %s: %v answered %T, want text", s, args, v)
	}
	m := make(map[string]string)
	for l := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok {
			m[name] = value
		}
	}
	return m, nil
}

// role returns the server's role as INFO replication says: "master" or
// "slave".
func (s *Redis) role(ctx context.Context) (string, error) {
	info, err := s.Info(ctx, "replication")
	return info["role"], err
}

// replicaInSync reports, for a replica, whether its link to its master is up.
func (s *Redis) replicaInSync(ctx context.Context) error {
	info, err := s.fields(ctx, "INFO", "replication")
	if err != nil {
		return err
	}
	if info["role"] == "slave" && info["master_link_status"] != "up" {
		return fmt.Errorf("proc: %s: replica link to its master is %q", s, info["master_link_status"])
	}
	return nil
}

// poll calls check until it returns nil or ctx ends; it then returns the
// last error check returned.
func poll(ctx context.Context, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// versions caches the major version of each redis-server binary.
var versions sync.Map // path -> majorVersion

type majorVersion struct {
	major int
	err   error
}

var versionPattern = regexp.MustCompile(`v=(\d+)\.`)

// serverMajor returns the major version of the redis-server at bin.
func serverMajor(bin string) (int, error) {
	if v, ok := versions.Load(bin); ok {
		mv := v.(majorVersion)
		return mv.major, mv.err
	}
	var mv majorVersion
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		mv.err = fmt.Errorf("proc: %s --version: %w", bin, err)
	} else if m := versionPattern.FindSubmatch(out); m == nil {
		mv.err = fmt.Errorf("proc: no version in %q", out)
	} else {
		mv.major, _ = strconv.Atoi(string(m[1]))
	}
	versions.Store(bin, mv)
	return mv.major, mv.err
}
