package plugin

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cuengine/engine/providers"
)

// ProtocolVersion is the version of the messages below. The engine refuses
// a plugin that answers the handshake with another.
//
//   - 1: the first.
//   - 2: ExternalName carries the caller's deadline and cancellation (the
//     messages are those of 1, but a plugin of 1 may run its ExternalName
//     past the caller's end).
//   - 3: Plan (what Apply would do, nothing written).
const ProtocolVersion = 3

// The environment a plugin is started with.
const (
	// EnvSocket is the path of the Unix socket the plugin listens on, in a
	// directory only the engine's user can enter.
	EnvSocket = "ENGINE_PROVIDER_SOCKET"
	// EnvProtocol is the engine's ProtocolVersion, for the plugin's log.
	EnvProtocol = "ENGINE_PROVIDER_PROTOCOL"
)

// Prefix starts the file name of every plugin: engine-provider-gcs serves
// the provider "gcs".
const Prefix = "engine-provider-"

const serviceName = "cuengine.provider.v1.Provider"

// handshakeRequest opens a connection: the engine's version and the name it
// found the plugin under.
type handshakeRequest struct {
	ProtocolVersion int    `json:"protocolVersion"`
	Name            string `json:"name"`
}

type handshakeResponse struct {
	ProtocolVersion int    `json:"protocolVersion"`
	Name            string `json:"name"`
}

// wireRequest is a providers.Request. Spec travels as JSON text and is
// decoded as the engine decodes templates (whole numbers as int64).
type wireRequest struct {
	Name         string            `json:"name"`
	ExternalName string            `json:"externalName,omitempty"`
	Owner        wireOwner         `json:"owner"`
	Spec         json.RawMessage   `json:"spec,omitempty"`
	Settings     map[string]string `json:"settings,omitempty"`
	Attempt      int               `json:"attempt,omitempty"`
	// ResetCredentials is providers.Request.ResetCredentials.
	ResetCredentials bool `json:"resetCredentials,omitempty"`
}

type wireOwner struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
}

type externalNameResponse struct {
	Name     string            `json:"name,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
	Error    *wireError        `json:"error,omitempty"`
}

type applyResponse struct {
	Exists    bool              `json:"exists"`
	Ready     bool              `json:"ready"`
	State     json.RawMessage   `json:"state,omitempty"`
	Sensitive map[string][]byte `json:"sensitive,omitempty"`
	Error     *wireError        `json:"error,omitempty"`
}

type deleteResponse struct {
	Error *wireError `json:"error,omitempty"`
}

// planResponse is a providers.Plan; a sensitive change carries no values.
type planResponse struct {
	Action  string       `json:"action,omitempty"`
	Changes []wireChange `json:"changes,omitempty"`
	Reason  string       `json:"reason,omitempty"`
	Error   *wireError   `json:"error,omitempty"`
}

type wireChange struct {
	Field     string `json:"field"`
	From      string `json:"from,omitempty"`
	To        string `json:"to,omitempty"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

func toWire(req providers.Request, attempt int) (*wireRequest, error) {
	w := &wireRequest{
		Name:         req.Name,
		ExternalName: req.ExternalName,
		Owner:        wireOwner(req.Owner),
		Settings:     req.Settings,
		Attempt:      attempt,

		ResetCredentials: req.ResetCredentials,
	}
	if req.Spec != nil {
		b, err := json.Marshal(req.Spec)
		if err != nil {
			return nil, fmt.Errorf("encoding the spec: %w", err)
		}
		w.Spec = b
	}
	return w, nil
}

func fromWire(w *wireRequest) (providers.Request, error) {
	req := providers.Request{
		Name:         w.Name,
		ExternalName: w.ExternalName,
		Owner:        providers.Owner(w.Owner),
		Settings:     w.Settings,

		ResetCredentials: w.ResetCredentials,
	}
	if len(w.Spec) > 0 {
		if err := utiljson.Unmarshal(w.Spec, &req.Spec); err != nil {
			return req, fmt.Errorf("decoding the spec: %w", err)
		}
	}
	return req, nil
}

// codec encodes the messages as JSON. It is forced on both ends, so the
// process-wide gRPC codec registry is left alone.
type codec struct{}

func (codec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (codec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (codec) Name() string                       { return "cuengine-json" }

// service is what the plugin's side serves.
type service interface {
	handshake(ctx context.Context, req *handshakeRequest) (*handshakeResponse, error)
	externalName(ctx context.Context, req *wireRequest) (*externalNameResponse, error)
	apply(ctx context.Context, req *wireRequest) (*applyResponse, error)
	delete(ctx context.Context, req *wireRequest) (*deleteResponse, error)
	plan(ctx context.Context, req *wireRequest) (*planResponse, error)
}

const (
	methodHandshake    = "Handshake"
	methodExternalName = "ExternalName"
	methodApply        = "Apply"
	methodDelete       = "Delete"
	methodPlan         = "Plan"
)

// fullMethod is the path a client invokes.
func fullMethod(m string) string { return "/" + serviceName + "/" + m }

// serviceDesc is what protoc-gen-go-grpc would generate for the service,
// written out: five unary methods.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*service)(nil),
	Methods: []grpc.MethodDesc{
		unary(methodHandshake, service.handshake),
		unary(methodExternalName, service.externalName),
		unary(methodApply, service.apply),
		unary(methodDelete, service.delete),
		unary(methodPlan, service.plan),
	},
	Metadata: "providers/plugin/protocol.go",
}

func unary[Req, Resp any](name string, call func(service, context.Context, *Req) (*Resp, error)) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(Req)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return call(srv.(service), ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod(name)}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return call(srv.(service), ctx, req.(*Req))
			})
		},
	}
}
