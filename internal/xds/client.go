// Package xds takes ratewarden's limits from an xDS management server, as
// envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW and as Envoy
// Gateway serves them: a state-of-the-world subscription to every
// RateLimitConfig resource (type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig)
// over the AggregatedDiscoveryService stream.
//
// Client is the config.Source of limits served this way. It keeps the
// subscription: every response is converted with
// config.FromRateLimitConfigs and handed over, then acknowledged (ACK); a
// response that does not convert is handed over as an error and rejected
// (NACK) with the error in error_detail, so the limits in force stay. A
// broken stream is opened again after a backoff, with the version last
// accepted, so a server that still has it sends nothing new.
package xds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratewarden/ratewarden/internal/config"
)

// TypeURL is the type of the resources Client subscribes to.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// keepaliveTime is how long a quiet connection waits before it pings the
// server, so that a server gone without a word (its node lost) is noticed.
// gRPC servers by default take a ping every 5 minutes and no more often.
const keepaliveTime = 5 * time.Minute

// Options configures a Client.
type Options struct {
	// ServerURL is the management server's gRPC target, host:port.
	ServerURL string
	// NodeID identifies this client to the server, which serves each node
	// its own snapshot (Envoy Gateway serves "envoy-ratelimit").
	NodeID string
	// NodeMetadata is sent as the node's metadata, each value a string.
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata when the stream opens.
	Headers map[string]string
	// TLS returns the TLS configuration of a new connection, and is called
	// before each, so that rotated certificates are picked up. Nil means
	// plaintext.
	TLS func() (*tls.Config, error)
	// Backoff spaces reconnections and repeated rejections.
	Backoff Backoff
	// MaxMessageBytes bounds one response from the server.
	MaxMessageBytes int
	// Config is how resources become a config.Config; its DefaultAlgorithm,
	// which counts every limit (a resource names no algorithm), must be set.
	Config config.Options
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// Client keeps a subscription to RateLimitConfig resources: it is a
// config.Source. Run runs it; Connected may be called concurrently with it.
type Client struct {
	opts      Options
	log       *slog.Logger
	node      *corev3.Node
	connected atomic.Bool
}

// New returns a Client for opts, or an error saying which option is invalid.
func New(opts Options) (*Client, error) {
	if opts.ServerURL == "" {
		return nil, errors.New("xds: the server URL must not be empty")
	}
	if opts.NodeID == "" {
		return nil, errors.New("xds: the node id must not be empty")
	}
	if err := opts.Backoff.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxMessageBytes <= 0 {
		return nil, fmt.Errorf("xds: the largest message must be positive, not %d", opts.MaxMessageBytes)
	}
	if opts.Config.DefaultAlgorithm == 0 {
		return nil, errors.New("xds: the limits need a default algorithm (Config.DefaultAlgorithm)")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	node := &corev3.Node{Id: opts.NodeID, UserAgentName: "ratewarden"}
	if len(opts.NodeMetadata) > 0 {
		fields := make(map[string]*structpb.Value, len(opts.NodeMetadata))
		for k, v := range opts.NodeMetadata {
			fields[k] = structpb.NewStringValue(v)
		}
		node.Metadata = &structpb.Struct{Fields: fields}
	}
	return &Client{opts: opts, log: log.With("xds_server", opts.ServerURL), node: node}, nil
}

// Client is a config.Source.
var _ config.Source = (*Client)(nil)

// Connected reports whether a stream to the server is open and has
// answered.
func (c *Client) Connected() bool { return c.connected.Load() }

// Origin names the server and the node the limits come from:
// "xDS server host:port (node id)".
func (c *Client) Origin() config.Origin {
	return config.Origin{Name: fmt.Sprintf("xDS server %s (node %s)", c.opts.ServerURL, c.opts.NodeID), Resources: true}
}

// Load returns no Config: the limits come with the server's first
// response, through Run.
func (c *Client) Load(context.Context) (*config.Config, error) { return nil, nil }

// subscription is what a Client remembers across streams.
type subscription struct {
	// accepted is the version last accepted, sent when a stream opens.
	accepted string
	// rejections counts the responses rejected in a row.
	rejections int
}

// Run subscribes until ctx ends, calling apply with the outcome of every
// response, one call at a time, before the response is acknowledged or
// rejected. A failed connection or stream is logged and opened again after
// a backoff, which starts over once a stream has answered.
func (c *Client) Run(ctx context.Context, apply func(config.Update)) {
	var sub subscription
	failures := 0
	for {
		answered, err := c.stream(ctx, &sub, apply)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if answered {
			failures = 0
		}
		wait := c.opts.Backoff.Delay(failures, rand.Float64)
		failures++
		c.log.Warn("xds: no stream to the management server; retrying", "in", wait, "err", err)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// stream connects, opens one stream and serves it until it fails. It
// reports whether the server answered on it.
func (c *Client) stream(ctx context.Context, sub *subscription, apply func(config.Update)) (answered bool, err error) {
	creds := insecure.NewCredentials()
	if c.opts.TLS != nil {
		tc, err := c.opts.TLS()
		if err != nil {
			return false, err
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(c.opts.ServerURL,
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: 20 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.opts.MaxMessageBytes)),
		grpc.WithUserAgent("ratewarden"),
	)
	if err != nil {
		return false, fmt.Errorf("xds: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(c.opts.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.opts.Headers))
	}
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("xds: opening the stream: %w", err)
	}
	// The node goes with the first request only; the server keeps it for
	// the stream.
	first := &discoveryv3.DiscoveryRequest{Node: c.node, TypeUrl: TypeURL, VersionInfo: sub.accepted}
	if err := st.Send(first); err != nil {
		return false, c.recvError(st, err)
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return answered, fmt.Errorf("xds: %w", err)
		}
		if !answered {
			answered = true
			c.connected.Store(true)
			c.log.Info("xds: subscribed to rate limit configurations", "node_id", c.opts.NodeID)
		}
		reply := c.handle(resp, sub, apply)
		if reply.ErrorDetail != nil && sub.rejections > 1 {
			// A server that resends what was rejected (go-control-plane's
			// snapshot cache does, at once) is answered after a backoff, so
			// that the two do not spin.
			if !sleep(ctx, c.opts.Backoff.Delay(sub.rejections-2, rand.Float64)) {
				return answered, ctx.Err()
			}
		}
		if err := st.Send(reply); err != nil {
			return answered, c.recvError(st, err)
		}
	}
}

// recvError returns why a stream whose Send failed with err ended: Send
// reports only io.EOF, Recv the status.
func (c *Client) recvError(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, err error) error {
	if _, rerr := st.Recv(); rerr != nil {
		err = rerr
	}
	return fmt.Errorf("xds: %w", err)
}

// handle converts resp, hands the outcome to apply and returns the ACK or
// NACK to send.
func (c *Client) handle(resp *discoveryv3.DiscoveryResponse, sub *subscription, apply func(config.Update)) *discoveryv3.DiscoveryRequest {
	version := resp.GetVersionInfo()
	cfg, err := c.convert(resp)
	if err != nil {
		sub.rejections++
		apply(config.Update{Version: version, Err: err})
		c.log.Debug("xds: rejected a response", "version", version, "err", err)
		return &discoveryv3.DiscoveryRequest{
			TypeUrl:       TypeURL,
			VersionInfo:   sub.accepted,
			ResponseNonce: resp.GetNonce(),
			ErrorDetail:   &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()},
		}
	}
	sub.rejections = 0
	apply(config.Update{Config: cfg, Version: version})
	sub.accepted = version
	c.log.Debug("xds: accepted a response", "version", version, "resources", len(resp.GetResources()))
	return &discoveryv3.DiscoveryRequest{TypeUrl: TypeURL, VersionInfo: version, ResponseNonce: resp.GetNonce()}
}

// convert turns a response's resources into a Config.
func (c *Client) convert(resp *discoveryv3.DiscoveryResponse) (*config.Config, error) {
	if resp.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("xds: a response of type %q, not %s", resp.GetTypeUrl(), TypeURL)
	}
	msgs := make([]*rlsconfv3.RateLimitConfig, len(resp.GetResources()))
	for i, a := range resp.GetResources() {
		m, err := unpack(a)
		if err != nil {
			return nil, fmt.Errorf("xds: resources[%d]: %w", i, err)
		}
		msgs[i] = m
	}
	cfg, err := config.FromRateLimitConfigs(msgs, c.opts.Config)
	if err != nil {
		return nil, fmt.Errorf("xds: %w", err)
	}
	return cfg, nil
}

// unpack decodes one resource.
func unpack(a *anypb.Any) (*rlsconfv3.RateLimitConfig, error) {
	if a.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("type %q, not %s", a.GetTypeUrl(), TypeURL)
	}
	m := &rlsconfv3.RateLimitConfig{}
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return nil, fmt.Errorf("not a RateLimitConfig: %w", err)
	}
	return m, nil
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
