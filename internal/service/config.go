package service

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// ConfigStore is the configuration the admin RPCs act on. *groupcfg.Manager implements it.
type ConfigStore interface {
	// IncrementalAlterConfigs applies the changes unless ctx is done before they are applied.
	IncrementalAlterConfigs(ctx context.Context, resources []groupcfg.AlterResource, validateOnly bool) []groupcfg.AlterResult
	DescribeConfigs(resources []groupcfg.DescribeResource, includeSynonyms, includeDocumentation bool) []groupcfg.DescribeResult
}

// ConfigServer implements sharecoord.v1.ConfigService on a ConfigStore. The enum values of the
// API equal groupcfg's (both are Kafka's ids), so conversions are plain casts.
type ConfigServer struct {
	pb.UnimplementedConfigServiceServer

	store ConfigStore
	opts  ConfigOptions
}

// ConfigOptions configures a ConfigServer.
type ConfigOptions struct {
	// MaxResourcesPerRequest bounds the resources one IncrementalAlterConfigs request may
	// change (0 = no bound).
	MaxResourcesPerRequest int
}

// NewConfigServer returns a ConfigServer on store.
func NewConfigServer(store ConfigStore, opts ConfigOptions) *ConfigServer {
	return &ConfigServer{store: store, opts: opts}
}

// IncrementalAlterConfigs implements the IncrementalAlterConfigs RPC. The store logs every change
// it makes durable; a change whose deadline (the RPC's) passes before it is applied is refused.
func (s *ConfigServer) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) (*pb.IncrementalAlterConfigsResponse, error) {
	if n, limit := len(req.GetResources()), s.opts.MaxResourcesPerRequest; limit > 0 && n > limit {
		return nil, status.Errorf(codes.InvalidArgument, "the request alters %d resources; at most %d are allowed per "+
			"request (max.alter.config.resources.per.request): split it", n, limit)
	}
	in := make([]groupcfg.AlterResource, len(req.GetResources()))
	for i, r := range req.GetResources() {
		res := groupcfg.AlterResource{Type: groupcfg.ResourceType(r.GetResourceType()), Name: r.GetResourceName()}
		for _, c := range r.GetConfigs() {
			res.Configs = append(res.Configs, groupcfg.AlterConfig{
				Name:  c.GetName(),
				Op:    groupcfg.Operation(c.GetConfigOperation()),
				Value: c.Value,
			})
		}
		in[i] = res
	}
	results := s.store.IncrementalAlterConfigs(ctx, in, req.GetValidateOnly())
	out := &pb.IncrementalAlterConfigsResponse{Responses: make([]*pb.AlterConfigsResourceResponse, len(results))}
	for i, r := range results {
		out.Responses[i] = &pb.AlterConfigsResourceResponse{
			ResourceType: pb.ResourceType(r.Type),
			ResourceName: r.Name,
			ErrorCode:    errorCode(r.ErrorCode),
			ErrorMessage: r.ErrorMessage,
		}
	}
	return out, nil
}

// DescribeConfigs implements the DescribeConfigs RPC.
func (s *ConfigServer) DescribeConfigs(_ context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	in := make([]groupcfg.DescribeResource, len(req.GetResources()))
	for i, r := range req.GetResources() {
		in[i] = groupcfg.DescribeResource{
			Type: groupcfg.ResourceType(r.GetResourceType()),
			Name: r.GetResourceName(),
			Keys: r.GetConfigurationKeys(),
		}
	}
	results := s.store.DescribeConfigs(in, req.GetIncludeSynonyms(), req.GetIncludeDocumentation())
	out := &pb.DescribeConfigsResponse{Results: make([]*pb.DescribeConfigsResult, len(results))}
	for i, r := range results {
		res := &pb.DescribeConfigsResult{
			ResourceType: pb.ResourceType(r.Type),
			ResourceName: r.Name,
			ErrorCode:    errorCode(r.ErrorCode),
			ErrorMessage: r.ErrorMessage,
			Configs:      make([]*pb.DescribeConfigsResourceResult, len(r.Configs)),
		}
		for j, c := range r.Configs {
			dc := &pb.DescribeConfigsResourceResult{
				Name:          c.Name,
				ReadOnly:      c.ReadOnly,
				ConfigSource:  pb.ConfigSource(c.Source),
				IsSensitive:   c.Sensitive,
				ConfigType:    pb.ConfigType(c.Type),
				Documentation: c.Documentation,
			}
			if !c.Sensitive {
				dc.Value = &c.Value
				dc.EffectiveValue = &c.EffectiveValue
			}
			for _, syn := range c.Synonyms {
				ps := &pb.DescribeConfigsSynonym{Name: syn.Name, Source: pb.ConfigSource(syn.Source)}
				if !c.Sensitive {
					ps.Value = &syn.Value
				}
				dc.Synonyms = append(dc.Synonyms, ps)
			}
			res.Configs[j] = dc
		}
		out.Results[i] = res
	}
	return out, nil
}
