-- Returning Apple users sign in: POST /v1/sign-in with identity tokens minted before the
-- load (no nonce, so each can be presented again), 200 expected.
-- Arguments: TOKENS_FILE THREADS [TOTAL_RATE]. With TOTAL_RATE, each thread is paced to
-- its share of it (common.lua pace()); without, every connection sends as fast as it can.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")

function init(args)
  local thread_count = tonumber(args[2])
  prepared = {}
  for _, token in ipairs(my_lines(args[1], thread_count)) do
    prepared[#prepared + 1] = wrk.format("POST", "/v1/sign-in", { ["Content-Type"] = "application/json" },
      '{"provider":"apple","credential":{"identityToken":"' .. token .. '"}}')
  end
  cursor = 0
  if args[3] then pace(tonumber(args[3]) / thread_count) end
end

function request()
  cursor = cursor % #prepared + 1
  return prepared[cursor]
end

function response(status, headers, body)
  count(status, 200)
end
