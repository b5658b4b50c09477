-- wrk's classic pipelining script, as published in seeds/000:
--   wrk -t1 -c128 -d10s http://HOST:PORT -s pipeline.lua --latency -- /v1/pets 16
init = function(args)
   request_uri = args[1]
   depth = tonumber(args[2]) or 1

   local r = {}
   for i=1,depth do
     r[i] = wrk.format(nil, request_uri)
   end
   req = table.concat(r)
end

request = function()
   wrk.headers["J-Tenant-Id"] = "1007"
   return req
end
