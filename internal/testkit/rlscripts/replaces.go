// Package rlscripts holds curls of envoyproxy/ratelimit's integration
// scripts (integration-test/scripts in that project) that more than one of
// ratewarden's tests play: the path and headers each curl sends through
// their Envoy (examples/envoy/proxy.yaml), and whether the script expects
// curl -f to succeed.
package rlscripts

// Curl is one curl -f of a script: a GET of Path with Headers, pairs of
// name and value, through their Envoy, and whether it succeeds (OK), which
// it does unless the answer is OVER_LIMIT.
type Curl struct {
	Path    string
	Headers []string
	OK      bool
}

// Replaces returns the curls of replaces.sh, in order: a limit that
// replaces another by name takes its place in the request, and leaves it in
// force for the requests that do not match the replacing rule.
func Replaces() []Curl {
	return []Curl{
		// (foo: *), (bar: banned) is banned_limit, 0 a minute;
		// (source_cluster: proxy), (destination_cluster: override)
		// replaces it, 2 a minute.
		{"/twoheader", []string{"foo", "bkthomps", "bar", "banned"}, false},
		{"/fourheader", []string{"foo", "bkthomps", "bar", "banned", "source_cluster", "proxy", "destination_cluster", "mock"}, false},
		{"/fourheader", []string{"foo", "bkthomps", "bar", "banned", "source_cluster", "proxy", "destination_cluster", "override"}, true},
		{"/fourheader", []string{"foo", "bkthomps", "bar", "banned", "source_cluster", "proxy", "destination_cluster", "override"}, true},
		{"/fourheader", []string{"foo", "bkthomps", "bar", "banned", "source_cluster", "proxy", "destination_cluster", "override"}, false},
		// (foo: *), (bar: bkthomps) is bkthomps, 1 a minute;
		// (destination_cluster: bkthomps) replaces it, 2 a minute.
		{"/fourheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "bkthomps"}, true},
		{"/fourheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "bkthomps"}, true},
		{"/fourheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "bkthomps"}, false},
		{"/fourheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "not_bkthomps"}, true},
		{"/fourheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "not_bkthomps"}, false},
		{"/fourheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "bkthomps"}, false},
		// (category: account), 4 a minute, replaces bkthomps and
		// fake_name, (destination_cluster: fake)'s 2 a minute.
		{"/fiveheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"}, true},
		{"/fiveheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"}, true},
		{"/fiveheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"}, true},
		{"/fiveheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"}, true},
		{"/fiveheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"}, false},
		{"/twoheader", []string{"foo", "foo_2", "bar", "bkthomps"}, true},
		{"/twoheader", []string{"foo", "foo_2", "bar", "bkthomps"}, false},
		{"/fourheader", []string{"foo", "foo_3", "bar", "bar_3", "source_cluster", "proxy", "destination_cluster", "fake"}, true},
		{"/fourheader", []string{"foo", "foo_3", "bar", "bar_3", "source_cluster", "proxy", "destination_cluster", "fake"}, true},
		{"/fourheader", []string{"foo", "foo_3", "bar", "bar_3", "source_cluster", "proxy", "destination_cluster", "fake"}, false},
		{"/fiveheader", []string{"foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"}, false},
	}
}
