// The official gRPC-Web client (npm grpc-web) in its default text mode
// (application/grpc-web-text: base64 both ways), under Node with xhr2's
// XMLHttpRequest: unary and server-streaming calls, error statuses and a
// trailers-only answer, against sluice in front of the grpc-go server of
// main.go. Usage: node text_client.js BASE_URL; prints one JSON object.
global.XMLHttpRequest = require("xhr2");
const { GrpcWebClientBase, MethodDescriptor, MethodType } = require("grpc-web");
const { StringValue } = require("google-protobuf/google/protobuf/wrappers_pb.js");

const base = process.argv[2];
const client = new GrpcWebClientBase({ format: "text" });
const descriptor = (name, type) =>
  new MethodDescriptor(
    `/sluice.test.Echo/${name}`,
    type,
    StringValue,
    StringValue,
    (request) => request.serializeBinary(),
    StringValue.deserializeBinary
  );
const unary = descriptor("Unary", MethodType.UNARY);
const streaming = descriptor("Stream", MethodType.SERVER_STREAMING);
const value = (text) => {
  const message = new StringValue();
  message.setValue(text);
  return message;
};

function callUnary(text) {
  return new Promise((resolve) => {
    const call = client.rpcCall(`${base}/sluice.test.Echo/Unary`, value(text), {}, unary, (err, response) => {
      if (err) resolve({ code: err.code, message: err.message });
      else resolve({ value: response.getValue() });
    });
    call.on("metadata", () => {});
  });
}

function callStream(text) {
  return new Promise((resolve) => {
    const messages = [];
    const stream = client.serverStreaming(`${base}/sluice.test.Echo/Stream`, value(text), {}, streaming);
    let status = null;
    stream.on("data", (message) => messages.push(message.getValue()));
    stream.on("status", (s) => (status = { code: s.code, details: s.details, sent: (s.metadata || {})["x-sent"] }));
    stream.on("error", (err) => resolve({ messages, error: { code: err.code, message: err.message } }));
    stream.on("end", () => resolve({ messages, status }));
  });
}

(async () => {
  const out = {
    unary: await callUnary("hello"),
    unary_error: await callUnary("fail:5:no such pet"),
    stream: await callStream("3"),
    stream_error: await callStream("2:fail"),
  };
  console.log(JSON.stringify(out));
})();
