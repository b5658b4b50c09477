package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// textCalls makes gRPC-Web text-mode calls framed by hand: the request a
// base64 envelope, the answer read back through base64 runs (padding may
// end any of them) into frames, the trailer frame's fields parsed.
func textCalls(httpClient *http.Client, base string) map[string]any {
	out := map[string]any{}
	for name, call := range map[string][2]string{
		"unary":        {"Unary", "hello"},
		"unary_error":  {"Unary", "fail:5:no such pet"},
		"stream":       {"Stream", "3"},
		"stream_error": {"Stream", "2:fail"},
	} {
		out[name] = textCall(httpClient, base+"/"+service+"/"+call[0], call[1])
	}
	return out
}

func textCall(httpClient *http.Client, url, value string) map[string]any {
	message, err := proto.Marshal(wrapperspb.String(value))
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	envelope := make([]byte, 5, 5+len(message))
	binary.BigEndian.PutUint32(envelope[1:], uint32(len(message)))
	envelope = append(envelope, message...)
	body := base64.StdEncoding.EncodeToString(envelope)
	request, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	request.Header.Set("content-type", "application/grpc-web-text+proto")
	request.Header.Set("accept", "application/grpc-web-text")
	request.Header.Set("x-grpc-web", "1")
	response, err := httpClient.Do(request)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	defer response.Body.Close()
	raw, err := io.ReadAll(response.Body)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	result := map[string]any{
		"http_status":  response.StatusCode,
		"content_type": response.Header.Get("content-type"),
		"proto":        response.Proto,
	}
	// A trailers-only answer: the status is in the head.
	if status := response.Header.Get("grpc-status"); status != "" {
		result["status"] = status
		result["message"] = response.Header.Get("grpc-message")
	}
	decoded, err := decodeRuns(raw)
	if err != nil {
		result["error"] = err.Error()
		return result
	}
	var messages []string
	for len(decoded) >= 5 {
		flag, size := decoded[0], binary.BigEndian.Uint32(decoded[1:5])
		if uint32(len(decoded)-5) < size {
			result["error"] = "a frame cut short"
			break
		}
		payload := decoded[5 : 5+size]
		decoded = decoded[5+size:]
		if flag&0x80 != 0 {
			for _, line := range strings.Split(string(payload), "\r\n") {
				name, value, ok := strings.Cut(line, ":")
				if ok {
					result["trailer "+strings.ToLower(strings.TrimSpace(name))] = strings.TrimSpace(value)
				}
			}
			result["status"] = result["trailer grpc-status"]
			result["message"] = result["trailer grpc-message"]
			continue
		}
		var got wrapperspb.StringValue
		if err := proto.Unmarshal(payload, &got); err != nil {
			result["error"] = err.Error()
			break
		}
		messages = append(messages, got.GetValue())
	}
	result["messages"] = messages
	return result
}

// decodeRuns decodes base64 whose runs may each end in padding.
func decodeRuns(text []byte) ([]byte, error) {
	var out bytes.Buffer
	start := 0
	for i := 0; i+4 <= len(text); i += 4 {
		if bytes.IndexByte(text[i:i+4], '=') >= 0 || i+4 == len(text) {
			part, err := base64.StdEncoding.DecodeString(string(text[start : i+4]))
			if err != nil {
				return nil, err
			}
			out.Write(part)
			start = i + 4
		}
	}
	if start != len(text) {
		return nil, io.ErrUnexpectedEOF
	}
	return out.Bytes(), nil
}
