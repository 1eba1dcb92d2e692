// Package config reads ratewarden's limits: YAML files, one domain per file,
// each a tree of descriptors carrying rate limits. It parses and validates
// them (every error an *Error with file, line, column and field), builds the matching
// tree, and matches request descriptors to rules (Config.Match).
//
// A Source delivers the limits to the server: the files at a path, watched
// for changes (Watcher); the resources of an xDS server (xds.Client, with
// FromRateLimitConfigs); or a Config that never changes (Static).
//
// # Format
//
// The format is a superset of envoyproxy/ratelimit's: every file that project
// accepts is accepted with the same meaning, with the exceptions listed
// below.
//
//	domain: edge                      # required, unique across files unless merged
//	descriptors:
//	  - key: api_key                  # required
//	    value: premium                # optional; each '*' matches any run of bytes
//	    rate_limit:
//	      unit: minute                # second|minute|hour|day|week|month|year, any case
//	      requests_per_unit: 100      # 0 to 4294967295; 0 denies every hit
//	      unlimited: false            # true: matched, never counted; no unit then
//	      name: premium               # optional, for replaces
//	      replaces: [{name: basic}]   # drop these named limits when both apply
//	      unit_multiplier: 5          # extension: window = 5 minutes (default 1)
//	      algorithm: token_bucket     # extension: fixed_window|sliding_window_log|
//	                                  #   sliding_window_counter|token_bucket
//	      burst: 20                   # extension: token_bucket capacity (default requests_per_unit)
//	      shards: 4                   # extension: split over 4 keys, 1 to 64 (default 1)
//	    rate_limits:                  # extension: more limits, all of which apply
//	      - {unit: day, requests_per_unit: 10000}
//	    shadow_mode: false            # decide and count, but always answer OK
//	    quota_mode: false             # over the limit denies only when all quotas are
//	    metadata: {tier: gold}        # any mapping, returned in the response's dynamic metadata
//	    detailed_metric: false        # key-only node: the request's value joins the metric key
//	    value_to_metric: false        # key-only or wildcard node: likewise
//	    share_threshold: false        # wildcard node: all matching values share one state
//	    charge: false                 # extension: hits are usage already spent, recorded even
//	                                  #   past the limits (default: quota_mode, which also makes
//	                                  #   fixed_window the default algorithm of its limits)
//	    descriptors: []               # nested descriptors, up to MaxDepth levels
//
// A rule's limits are its rate_limit's, then its rate_limits' in order; two
// of them with the same algorithm and window are an error, since they would
// share one state. Each limit must pass algorithms.Limit.Validate.
//
// # YAML
//
// Files are read with gopkg.in/yaml.v3 into nodes that this package walks
// itself. Unknown fields, a field given twice and values of the wrong type
// are errors. As with envoyproxy/ratelimit's YAML library, anchors, aliases
// and "<<" merge keys work, any scalar is a string where a string is wanted
// ("value: 200"), null counts as an absent field, and booleans may also be
// written yes/no/on/off/y/n. A file must hold one document: an empty file, a
// file of comments only, and a document that is not a mapping are errors; a
// second document is an error (envoyproxy/ratelimit silently ignores it),
// and empty documents after the first (a trailing "---") are ignored.
//
// # Differences from envoyproxy/ratelimit
//
// Where envoyproxy/ratelimit accepts a file that is almost certainly a
// mistake, this package rejects it instead:
//   - a field known to the format but misplaced (a name in a descriptor, a
//     key in a rate_limit), which envoyproxy/ratelimit ignores;
//   - a second YAML document;
//   - unlimited with any unit, even an invalid one (envoyproxy/ratelimit
//     rejects only a valid one);
//   - a key given twice in a descriptor's metadata (envoyproxy/ratelimit
//     keeps the last), and a metadata number that is not finite.
//
// And matching differs in one corner: a key holding '*' is a literal key,
// and key "a_b" is distinct from key "a" with value "b" (envoyproxy/ratelimit
// joins key and value with '_' before comparing, so there they collide).
// Options.WildcardPrecedence may make the wildcard with the most literal
// bytes win over the first one that matches.
//
// An unlimited rate_limit may carry requests_per_unit, which is checked and
// ignored, as envoyproxy/ratelimit does; its name and replaces are kept in
// Rule.Name and Rule.Replaces.
package config
