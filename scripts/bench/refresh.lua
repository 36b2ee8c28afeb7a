-- Sessions refresh: POST /v1/sessions/refresh, 200 expected. Refresh tokens rotate on
-- every use and presenting a superseded one ends the session, so each thread owns a
-- disjoint slice of the sessions, sends at most one refresh per session at a time, and
-- keeps the session's current token from each answer. The request's X-Request-Id names
-- the session (connections are invisible to Lua). A session whose refresh failed is not
-- used again (lost=N).
-- Arguments: REFRESH_TOKENS_FILE THREADS.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")

function init(args)
  current = my_lines(args[1], tonumber(args[2]))
  sessions_init("refresh")
  for index = 1, #current do session_free(index) end
end

function request()
  local index = session_take()
  if not index then
    -- Every session is in flight or lost: send one that fails, and say so.
    bump("starved")
    return wrk.format("POST", "/v1/sessions/refresh", { ["Content-Type"] = "application/json" }, '{"refreshToken":"rt_none"}')
  end
  return wrk.format("POST", "/v1/sessions/refresh",
    { ["Content-Type"] = "application/json", ["X-Request-Id"] = prefix .. index },
    '{"refreshToken":"' .. current[index] .. '"}')
end

function response(status, headers, body)
  local succeeded = count(status, 200)
  local index = session_of(headers)
  if not index then return end
  local token = succeeded and body:match('"refreshToken":"([^"]+)"')
  if token then current[index] = token end
  session_settle(index, token ~= nil)
end
