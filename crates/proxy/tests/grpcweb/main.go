// The gRPC side of sluice's gRPC-Web tests (crates/proxy/tests/it/grpc_web.rs):
//
//	grpcweb server            a grpc-go server on 127.0.0.1:0 (h2c); prints its address
//	grpcweb client BASE CA    connect-go clients with connect.WithGRPCWeb() over HTTP/1.1,
//	                          HTTP/2 and HTTP/3, proto and JSON codecs; prints JSON results
//	grpcweb text BASE CA      gRPC-Web text-mode (base64) calls over HTTP/1.1, HTTP/2 and
//	                          HTTP/3, framed by hand (connect-go has no text mode)
//
// The service needs no generated code: grpc.ServiceDesc by hand, messages
// are google.protobuf.StringValue.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const service = "sluice.test.Echo"

func main() {
	if len(os.Args) < 2 {
		fail("usage: grpcweb server | client BASE CA | text BASE CA")
	}
	switch os.Args[1] {
	case "server":
		serve()
	case "client":
		out := map[string]any{}
		for _, protocol := range []string{"http1", "http2", "http3"} {
			for _, codec := range []string{"proto", "json"} {
				out[protocol+"/"+codec] = calls(client(protocol, os.Args[3]), os.Args[2], codec)
			}
		}
		printJSON(out)
	case "text":
		out := map[string]any{}
		for _, protocol := range []string{"http1", "http2", "http3"} {
			out[protocol] = textCalls(client(protocol, os.Args[3]), os.Args[2])
		}
		printJSON(out)
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(why string) {
	fmt.Fprintln(os.Stderr, why)
	os.Exit(2)
}

func printJSON(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		fail(err.Error())
	}
}

// --- the server -------------------------------------------------------------

type echo struct{}

// Unary answers "echo: VALUE"; "fail:CODE:MESSAGE" fails with that status
// before any message (grpc-go then sends a trailers-only answer).
func (echo) unary(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	if code, message, ok := failure(in.GetValue()); ok {
		return nil, status.Error(code, message)
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-echo-header", "h"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-echo-trailer", "t"))
	return wrapperspb.String("echo: " + in.GetValue()), nil
}

// Stream sends N messages for "N", then ends; "N:fail" fails after them
// (the status in trailers after a body).
func (echo) stream(in *wrapperspb.StringValue, out grpc.ServerStream) error {
	count, rest, _ := strings.Cut(in.GetValue(), ":")
	n, err := strconv.Atoi(count)
	if err != nil {
		return status.Error(codes.InvalidArgument, "not a count")
	}
	for i := 0; i < n; i++ {
		if err := out.SendMsg(wrapperspb.String(fmt.Sprintf("message %d", i))); err != nil {
			return err
		}
	}
	out.SetTrailer(metadata.Pairs("x-sent", strconv.Itoa(n)))
	if rest == "fail" {
		return status.Error(codes.Aborted, "stopped after the messages")
	}
	return nil
}

func failure(value string) (codes.Code, string, bool) {
	parts := strings.SplitN(value, ":", 3)
	if len(parts) != 3 || parts[0] != "fail" {
		return 0, "", false
	}
	code, err := strconv.Atoi(parts[1])
	if err != nil {
		return codes.Internal, "bad code", true
	}
	return codes.Code(code), parts[2], true
}

// jsonCodec lets the server take `application/grpc+json` (what a
// gRPC-Web `+json` call becomes), as connect-go's JSON codec writes it.
type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return protojson.Marshal(v.(proto.Message)) }
func (jsonCodec) Unmarshal(data []byte, v any) error {
	return protojson.Unmarshal(data, v.(proto.Message))
}
func (jsonCodec) Name() string { return "json" }

func serve() {
	encoding.RegisterCodec(jsonCodec{})
	server := grpc.NewServer()
	server.RegisterService(&grpc.ServiceDesc{
		ServiceName: service,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Unary",
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				return echo{}.unary(ctx, in)
			},
		}},
		Streams: []grpc.StreamDesc{{
			StreamName:    "Stream",
			ServerStreams: true,
			Handler: func(srv any, stream grpc.ServerStream) error {
				in := new(wrapperspb.StringValue)
				if err := stream.RecvMsg(in); err != nil {
					return err
				}
				return echo{}.stream(in, stream)
			},
		}},
	}, echo{})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err.Error())
	}
	fmt.Println(listener.Addr().String())
	if err := server.Serve(listener); err != nil {
		fail(err.Error())
	}
}

// --- the clients ------------------------------------------------------------

// client speaks only `protocol` to the proxy's TLS listener, trusting CA.
func client(protocol, ca string) *http.Client {
	pem, err := os.ReadFile(ca)
	if err != nil {
		fail(err.Error())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	config := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	var transport http.RoundTripper
	switch protocol {
	case "http1":
		config.NextProtos = []string{"http/1.1"}
		transport = &http.Transport{TLSClientConfig: config, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	case "http2":
		transport = &http2.Transport{TLSClientConfig: config}
	case "http3":
		transport = &http3.Transport{TLSClientConfig: config}
	}
	return &http.Client{Transport: transport, Timeout: 10 * time.Second}
}

type callError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func errorOf(err error) *callError {
	var connectErr *connect.Error
	if errors.As(err, &connectErr) {
		return &callError{Code: connectErr.Code().String(), Message: connectErr.Message()}
	}
	return &callError{Code: "transport", Message: err.Error()}
}

// calls makes each kind of call with connect-go's gRPC-Web protocol.
func calls(httpClient *http.Client, base, codec string) map[string]any {
	options := []connect.ClientOption{connect.WithGRPCWeb()}
	if codec == "json" {
		options = append(options, connect.WithProtoJSON())
	}
	unary := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient, base+"/"+service+"/Unary", options...)
	stream := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient, base+"/"+service+"/Stream", options...)
	out := map[string]any{}
	ctx := context.Background()
	if answer, err := unary.CallUnary(ctx, connect.NewRequest(wrapperspb.String("hello"))); err != nil {
		out["unary"] = errorOf(err)
	} else {
		out["unary"] = map[string]string{
			"value":        answer.Msg.GetValue(),
			"header":       answer.Header().Get("x-echo-header"),
			"trailer":      answer.Trailer().Get("x-echo-trailer"),
			"content_type": answer.Header().Get("content-type"),
		}
	}
	_, err := unary.CallUnary(ctx, connect.NewRequest(wrapperspb.String("fail:5:no such pet")))
	out["unary_error"] = errorOf(err)
	for name, value := range map[string]string{"stream": "3", "stream_error": "2:fail", "stream_empty": "0"} {
		call, err := stream.CallServerStream(ctx, connect.NewRequest(wrapperspb.String(value)))
		if err != nil {
			out[name] = errorOf(err)
			continue
		}
		var messages []string
		for call.Receive() {
			messages = append(messages, call.Msg().GetValue())
		}
		result := map[string]any{"messages": messages, "sent": call.ResponseTrailer().Get("x-sent")}
		if err := call.Err(); err != nil {
			result["error"] = errorOf(err)
		}
		_ = call.Close()
		out[name] = result
	}
	return out
}
