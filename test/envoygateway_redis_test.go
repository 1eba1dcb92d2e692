package test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// The parts of Kubernetes' API (core/v1 Namespace, Service, Container;
// apps/v1 StatefulSet) that envoy/gateway/redis.yaml uses.
type (
	k8sNamespace struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
	}
	k8sService struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			ClusterIP string            `yaml:"clusterIP"`
			Selector  map[string]string `yaml:"selector"`
			Ports     []struct {
				Name       string `yaml:"name"`
				Port       int32  `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	k8sStatefulSet struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			ServiceName string `yaml:"serviceName"`
			Replicas    int32  `yaml:"replicas"`
			Selector    struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec struct {
					SecurityContext struct {
						RunAsNonRoot   bool  `yaml:"runAsNonRoot"`
						RunAsUser      int64 `yaml:"runAsUser"`
						RunAsGroup     int64 `yaml:"runAsGroup"`
						FSGroup        int64 `yaml:"fsGroup"`
						SeccompProfile struct {
							Type string `yaml:"type"`
						} `yaml:"seccompProfile"`
					} `yaml:"securityContext"`
					Containers []k8sContainer `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
			VolumeClaimTemplates []struct {
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
				Spec struct {
					AccessModes []string `yaml:"accessModes"`
					Resources   struct {
						Requests map[string]string `yaml:"requests"`
					} `yaml:"resources"`
				} `yaml:"spec"`
			} `yaml:"volumeClaimTemplates"`
		} `yaml:"spec"`
	}
	k8sContainer struct {
		Name            string   `yaml:"name"`
		Image           string   `yaml:"image"`
		ImagePullPolicy string   `yaml:"imagePullPolicy"`
		Args            []string `yaml:"args"`
		Ports           []struct {
			Name          string `yaml:"name"`
			ContainerPort int32  `yaml:"containerPort"`
		} `yaml:"ports"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
)

// gatewayRedis is envoy/gateway/redis.yaml, decoded.
type gatewayRedis struct {
	namespace k8sNamespace
	service   k8sService
	set       k8sStatefulSet
}

// readGatewayRedis decodes envoy/gateway/redis.yaml.
func readGatewayRedis(t *testing.T) gatewayRedis {
	t.Helper()
	ms := readManifests(t, envoyFile("gateway/redis.yaml"))
	require.Len(t, ms, 3)
	var r gatewayRedis
	only(t, ms, "v1", "Namespace", &r.namespace)
	only(t, ms, "v1", "Service", &r.service)
	only(t, ms, "apps/v1", "StatefulSet", &r.set)
	return r
}

// container returns the StatefulSet's one container.
func (r gatewayRedis) container(t *testing.T) k8sContainer {
	t.Helper()
	cs := r.set.Spec.Template.Spec.Containers
	require.Len(t, cs, 1)
	return cs[0]
}

// settings returns the --name value pairs of the container's arguments.
func (r gatewayRedis) settings(t *testing.T) map[string]string {
	t.Helper()
	args := r.container(t).Args
	require.Zero(t, len(args)%2, "--name value pairs: %q", args)
	out := map[string]string{}
	for i := 0; i < len(args); i += 2 {
		name, ok := strings.CutPrefix(args[i], "--")
		require.True(t, ok, "--name value pairs: %q", args)
		out[name] = args[i+1]
	}
	return out
}

// TestEnvoyGatewayRedisManifest checks envoy/gateway/redis.yaml: the Redis
// that values.yaml and envoy-gateway.yaml name, a StatefulSet of one pod
// behind a Service at that address, whose data directory is its
// PersistentVolumeClaim's volume, run with the settings docs/redis.md and
// docs/token-budgets.md give budgets of a month (an append-only file
// flushed each second, no eviction, a memory cap below the container's).
// redis-server takes its arguments and reads each back.
func TestEnvoyGatewayRedisManifest(t *testing.T) {
	r := readGatewayRedis(t)
	host, port, err := net.SplitHostPort(envoyGatewayConfig(t).RateLimit.Backend.Redis.URL)
	require.NoError(t, err)
	labels := strings.Split(host, ".")
	require.Equal(t, []string{r.service.Metadata.Name, r.namespace.Metadata.Name, "svc", "cluster", "local"}, labels,
		"the URL names the Service in its namespace")
	assert.Equal(t, r.namespace.Metadata.Name, r.service.Metadata.Namespace)
	assert.Equal(t, r.namespace.Metadata.Name, r.set.Metadata.Namespace)
	require.Len(t, r.service.Spec.Ports, 1)
	assert.Equal(t, port, strconv.Itoa(int(r.service.Spec.Ports[0].Port)))
	assert.Equal(t, "None", r.service.Spec.ClusterIP, "headless: the name is the pod's")

	s := r.set.Spec
	assert.Equal(t, r.service.Metadata.Name, s.ServiceName)
	assert.EqualValues(t, 1, s.Replicas)
	assert.Equal(t, s.Selector.MatchLabels, s.Template.Metadata.Labels)
	assert.Equal(t, r.service.Spec.Selector, s.Template.Metadata.Labels)
	c := r.container(t)
	require.Len(t, c.Ports, 1)
	assert.Equal(t, r.service.Spec.Ports[0].TargetPort, c.Ports[0].Name)
	assert.EqualValues(t, r.service.Spec.Ports[0].Port, c.Ports[0].ContainerPort, "redis-server's default port")
	assert.True(t, s.Template.Spec.SecurityContext.RunAsNonRoot)
	assert.True(t, c.SecurityContext.ReadOnlyRootFilesystem && !c.SecurityContext.AllowPrivilegeEscalation)

	settings := r.settings(t)
	assert.Equal(t, map[string]string{
		"appendonly": "yes", "appendfsync": "everysec", "save": "", "maxmemory-policy": "noeviction",
	}, map[string]string{
		"appendonly": settings["appendonly"], "appendfsync": settings["appendfsync"], "save": settings["save"], "maxmemory-policy": settings["maxmemory-policy"],
	}, "the persistence a month of budgets needs")
	require.Len(t, s.VolumeClaimTemplates, 1)
	claim := s.VolumeClaimTemplates[0]
	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, claim.Metadata.Name, c.VolumeMounts[0].Name)
	assert.Equal(t, c.VolumeMounts[0].MountPath, settings["dir"], "the log is written to the claim's volume")
	assert.Equal(t, []string{"ReadWriteOnce"}, claim.Spec.AccessModes)
	assert.NotEmpty(t, claim.Spec.Resources.Requests["storage"])
	maxmemory, err := redisConfigValue(settings["maxmemory"])
	require.NoError(t, err)
	bytes, err := strconv.ParseUint(maxmemory, 10, 64)
	require.NoError(t, err)
	limit := c.Resources.Limits["memory"]
	assert.Equal(t, "2Gi", limit)
	assert.Equal(t, c.Resources.Requests["memory"], limit)
	assert.LessOrEqual(t, bytes, uint64(1<<30), "half the container's 2 GiB at most: a rewrite of the log forks")

	// redis-server takes the arguments, the data directory aside (the
	// test's own), and runs as they say.
	srv := startGatewayRedis(t, r)
	ctx := context.Background()
	client := srv.Client(t)
	for name, value := range settings {
		if name == "dir" {
			continue
		}
		want, err := redisConfigValue(value)
		require.NoError(t, err)
		got, err := client.ConfigGet(ctx, name).Result()
		require.NoError(t, err)
		assert.Equal(t, want, got[name], "--%s %s", name, value)
	}
	info, err := srv.Info(ctx, "persistence")
	require.NoError(t, err)
	assert.Equal(t, "1", info["aof_enabled"])
}

// startGatewayRedis starts redis-server with the arguments of
// envoy/gateway/redis.yaml, but for --dir: the test gives it a directory
// of its own, which it keeps across restarts.
func startGatewayRedis(t *testing.T, r gatewayRedis) *redistest.Server {
	t.Helper()
	var args []string
	for name, value := range r.settings(t) {
		if name != "dir" {
			args = append(args, "--"+name, value)
		}
	}
	return redistest.StartRedis(t, proc.RedisConfig{Args: args})
}

// TestEnvoyGatewayRedisKeepsBudgets: the Redis of envoy/gateway/redis.yaml
// keeps what a key has spent of its monthly budget when it is killed and
// restarted, as its pod is when it fails, where a Redis without
// persistence, as docs/redis.md runs one for limits of seconds to hours,
// forgets it. The server takes the policy's limits from xDS, as Envoy
// Gateway serves them, and counts in that Redis.
func TestEnvoyGatewayRedisKeepsBudgets(t *testing.T) {
	for _, c := range []struct {
		name    string
		persist bool
	}{{"redis.yaml", true}, {"without persistence", false}} {
		t.Run(c.name, func(t *testing.T) {
			var redis *redistest.Server
			if c.persist {
				redis = startGatewayRedis(t, readGatewayRedis(t))
			} else {
				redis = redistest.StartRedis(t, proc.RedisConfig{Args: []string{"--save", "", "--appendonly", "no"}})
			}
			g := startGatewayXDS(t, map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": redis.Addr()})
			route := tokenBudgetRoute(t)
			g.serve(t, "1", xdstest.Configs(gatewayListener, route)...)
			const domain = "default/token-budget"
			check := xdstest.HTTPRequest{Headers: map[string]string{"x-api-key": "k1"}}
			spent := xdstest.HTTPRequest{Headers: check.Headers,
				Metadata: map[string]map[string]any{aiGatewayMetadata: {"llm_total_token": 1_000_000}}}

			assert.Equal(t, "OK 5000000/MONTH remaining=4000000", g.answer(t, route, domain, spent, true))
			redis.Kill()
			require.NoError(t, redis.Start())
			ctx := context.Background()
			require.Eventually(t, func() bool { return g.srv.Serving(ctx) }, 15*time.Second, 20*time.Millisecond, "ready again with Redis")
			want := "OK 5000000/MONTH remaining=5000000"
			if c.persist {
				want = "OK 5000000/MONTH remaining=4000000"
			}
			assert.Equal(t, want, g.answer(t, route, domain, check, false), "after Redis was killed and restarted")
		})
	}
}
