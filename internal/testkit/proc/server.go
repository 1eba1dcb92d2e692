package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/addrfile"
)

// serverStartTimeout bounds how long a server may take to name its
// addresses when the caller's context does not.
const serverStartTimeout = 30 * time.Second

// ServerConfig says how StartServer starts a ratewarden server binary.
type ServerConfig struct {
	// Name names the process in messages; empty means Bin's base name.
	Name string
	// Bin and Args are the program and its arguments: the server binary,
	// or any program that writes RLS_ADDR_FILE as it does.
	Bin  string
	Args []string
	// Dir is the working directory; empty means the current one.
	Dir string
	// Env holds variables set on top of BaseEnv, whose RLS_ variables are
	// left out. RLS_GRPC_ADDR and RLS_HTTP_ADDR default to 127.0.0.1:0;
	// RLS_ADDR_FILE is StartServer's own.
	Env map[string]string
	// BaseEnv is the environment the server starts from, "key=value"
	// strings as os.Environ returns them; nil means this process's.
	BaseEnv []string
	// NoAddrFile is for a server built before RLS_ADDR_FILE existed (the
	// baseline of a benchmark): StartServer then gives RLS_GRPC_ADDR and
	// RLS_HTTP_ADDR loopback ports the kernel picked and freed, which
	// something else may take before the server binds them, and returns
	// once the server's gRPC health answers there.
	NoAddrFile bool
}

// Server is a running ratewarden server binary and the addresses its
// listeners are bound to.
type Server struct {
	*Process
	// Addrs holds the bound addresses by listener name (addrfile.GRPC, ...).
	Addrs   addrfile.Addrs
	addrDir string
}

// StartServer starts cfg's server and waits until it has written the
// addresses of its listeners to RLS_ADDR_FILE, which it does once they
// serve. It fails when the process exits first, or ctx ends, with the
// server's output in the error. Close stops it.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, serverStartTimeout)
		defer cancel()
	}
	addrDir, err := os.MkdirTemp("", "ratewarden-addrs-")
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	addrPath := filepath.Join(addrDir, "addrs.json")
	vars := map[string]string{"RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": "127.0.0.1:0"}
	var picked addrfile.Addrs
	if cfg.NoAddrFile {
		ports, err := reservePorts(2, false)
		if err != nil {
			_ = os.RemoveAll(addrDir)
			return nil, err
		}
		defer releasePorts(ports...)
		picked = addrfile.Addrs{
			addrfile.GRPC: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
			addrfile.HTTP: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		}
		vars["RLS_GRPC_ADDR"], vars["RLS_HTTP_ADDR"] = picked[addrfile.GRPC], picked[addrfile.HTTP]
	}
	for k, v := range cfg.Env {
		vars[k] = v
	}
	vars["RLS_ADDR_FILE"] = addrPath
	base := cfg.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	env := environ(base, vars)
	name := cfg.Name
	if name == "" {
		name = filepath.Base(cfg.Bin)
	}
	p, err := Start(Command{Name: name, Bin: cfg.Bin, Args: cfg.Args, Dir: cfg.Dir, Env: env})
	if err != nil {
		_ = os.RemoveAll(addrDir)
		return nil, err
	}
	s := &Server{Process: p, addrDir: addrDir}
	if cfg.NoAddrFile {
		s.Addrs = picked
		if err := s.WaitServing(ctx); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	for {
		s.Addrs, err = addrfile.Read(addrPath)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, addrfile.ErrNotWritten) {
			s.Close()
			return nil, fmt.Errorf("proc: %s: %w", name, err)
		}
		select {
		case <-p.Exited():
			s.Close()
			return nil, fmt.Errorf("proc: %s exited at start (%v):\n%s", name, p.cmd.ProcessState, p.Output())
		case <-ctx.Done():
			s.Close()
			return nil, fmt.Errorf("proc: %s named no addresses in RLS_ADDR_FILE: %w\n%s", name, ctx.Err(), p.Output())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WaitServing waits until the server's gRPC health service, over plain
// TCP, answers SERVING (its backend answers and its limits are loaded). It
// fails when the process exits first or ctx ends, with the end of the
// server's output in the error.
func (s *Server) WaitServing(ctx context.Context) error {
	conn, err := grpc.NewClient(s.Addrs[addrfile.GRPC], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("proc: %s: %w", s, err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := health.Check(callCtx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-s.Exited():
			return fmt.Errorf("proc: %s exited:\n%s", s, s.Tail(20))
		case <-ctx.Done():
			return fmt.Errorf("proc: %s not SERVING (%v): %w\n%s", s, err, ctx.Err(), s.Tail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Environ returns this process's environment without its RLS_ variables,
// and vars on top: the environment StartServer gives a server, so that no
// setting of the caller's shell reaches it unasked.
func Environ(vars map[string]string) []string {
	return environ(os.Environ(), vars)
}

// environ returns base, "key=value" strings, without its RLS_ variables,
// and vars on top.
func environ(base []string, vars map[string]string) []string {
	var env []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "RLS_") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// Close stops the server (see Process.Stop) and removes the directory of
// its address file.
func (s *Server) Close() {
	s.Stop()
	_ = os.RemoveAll(s.addrDir)
}
