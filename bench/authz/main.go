// An Envoy ext_authz gRPC server for sluice's tests, built from Envoy's
// published proto (go-control-plane's generated envoy.service.auth.v3)
// with grpc-go. It decides by the request's path:
//
//   /deny...  denied: the status of `x-test-status` (default 403), a body
//             naming the path, and `x-deny-reason` + `www-authenticate`
//             headers for the client;
//   /slow...  waits `-slow` before allowing (timeouts);
//   /error... answers gRPC UNAVAILABLE (an error, not a decision);
//   else      allowed: `x-auth-user` set from the request's `x-user`
//             header (default "alice"), `x-authz-saw` holding
//             "METHOD PATH host=HOST body=BYTES", `authorization` removed
//             (headers_to_remove), `x-auth-response` added to the answer.
//
// Usage: authz-grpc -listen 127.0.0.1:0 (the chosen address is printed on
// its first line: "listening ADDR").
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type server struct {
	authv3.UnimplementedAuthorizationServer
	slow time.Duration
}

func header(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, Value: value}}
}

func (s *server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	http := req.GetAttributes().GetRequest().GetHttp()
	path := http.GetPath()
	switch {
	case strings.HasPrefix(path, "/error"):
		return nil, status.Error(codes.Unavailable, "the test's auth service is unavailable")
	case strings.HasPrefix(path, "/slow"):
		select {
		case <-time.After(s.slow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case strings.HasPrefix(path, "/deny"):
		code := 403
		if text, ok := http.GetHeaders()["x-test-status"]; ok {
			if n, err := strconv.Atoi(text); err == nil {
				code = n
			}
		}
		return &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied), Message: "denied"},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode(code)},
				Headers: []*corev3.HeaderValueOption{header("x-deny-reason", "grpc says no"), header("www-authenticate", `Basic realm="grpc"`), header("content-type", "text/plain")},
				Body:    "denied by grpc for " + path,
			}},
		}, nil
	}
	user := "alice"
	if u, ok := http.GetHeaders()["x-user"]; ok {
		user = u
	}
	saw := fmt.Sprintf("%s %s host=%s body=%d", http.GetMethod(), path, http.GetHost(), len(http.GetBody())+len(http.GetRawBody()))
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{header("x-auth-user", user), header("x-authz-saw", saw)},
			HeadersToRemove:      []string{"authorization"},
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{header("x-auth-response", "grpc")},
		}},
	}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	slow := flag.Duration("slow", 2*time.Second, "how long /slow waits")
	flag.Parse()
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", lis.Addr())
	s := grpc.NewServer()
	authv3.RegisterAuthorizationServer(s, &server{slow: *slow})
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
