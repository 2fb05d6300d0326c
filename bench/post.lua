-- POST one request body from a file on every request.
-- wrk arguments after "--": <body file> <content type> [Inference-Header-Content-Length]
function init(args)
   local file = assert(io.open(args[1], "rb"))
   wrk.body = file:read("*a")
   file:close()
   wrk.method = "POST"
   wrk.headers["Content-Type"] = args[2]
   if args[3] ~= nil and args[3] ~= "" then
      wrk.headers["Inference-Header-Content-Length"] = args[3]
   end
end

-- One JSON line for the harness to parse.
function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      '{"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d}\n',
      summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(99)))
end
