package rls

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// responseMetadata returns the response's dynamic metadata
// (Options.ResponseDynamicMetadata), laid out as envoyproxy/ratelimit lays it
// out:
//
//	{
//	  "domain": "edge",
//	  "descriptors": [{"entries": ["key=value", ...], "limit": "...", "hitsAddend": 2}, ...],
//	  "hitsAddend": 3,
//	  "metadata": {...}
//	}
//
// for req. A descriptor's limit (its override, in protobuf text) and
// hitsAddend appear when the request sets them, and the request's
// hitsAddend when it is not 0. metadata merges rules, the metadata of the
// rules whose descriptors were not over their limit, in request order
// (plan.admittedMetadata): where two rules give one key, the first wins,
// unless both give a mapping, which merge the same way. It is left out when
// no such rule has metadata.
func responseMetadata(req *rlsv3.RateLimitRequest, rules []*structpb.Struct) *structpb.Struct {
	descs := req.GetDescriptors()
	list := make([]*structpb.Value, len(descs))
	for i, d := range descs {
		entries := make([]*structpb.Value, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			entries[j] = structpb.NewStringValue(e.GetKey() + "=" + e.GetValue())
		}
		fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if l := d.GetLimit(); l != nil {
			fields["limit"] = structpb.NewStringValue(l.String())
		}
		if h := d.GetHitsAddend(); h != nil {
			fields["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		list[i] = structpb.NewStructValue(&structpb.Struct{Fields: fields})
	}
	out := &structpb.Struct{Fields: map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.GetDomain()),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: list}),
	}}
	if h := req.GetHitsAddend(); h != 0 {
		out.Fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	var merged *structpb.Struct
	for _, md := range rules {
		if merged == nil {
			merged = &structpb.Struct{Fields: make(map[string]*structpb.Value)}
		}
		mergeStruct(merged, md)
	}
	if len(merged.GetFields()) > 0 {
		out.Fields["metadata"] = structpb.NewStructValue(merged)
	}
	return out
}

// mergeStruct adds to dst the fields of src it lacks, copies of them, and
// merges src's mappings into dst's mappings of the same name. src is left
// alone: it belongs to the configuration.
func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		have, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = proto.Clone(v).(*structpb.Value)
			continue
		}
		if ds, ss := have.GetStructValue(), v.GetStructValue(); ds != nil && ss != nil {
			mergeStruct(ds, ss)
		}
	}
}
