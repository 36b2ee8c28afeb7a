-- Signed-in Apple users link a classic Facebook access token (POST /v1/users/me/identities)
-- and unlink it again (DELETE /v1/users/me/identities/facebook), over and over. Each
-- request is one command and counts once (link=N unlink=N say how many of each succeeded).
-- Each thread owns a disjoint slice of the users and sends at most one request per user at
-- a time; the request's X-Request-Id names the user. A user whose request failed is not
-- used again (lost=N). Unlinking revokes the Facebook token at the provider, so each link uses the
-- user's next token; a user out of tokens stops (exhausted=N). Arguments: USERS_FILE ("<access token>
-- <Facebook token> ..." a line) THREADS.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")

function init(args)
  links, unlinks, linked, next_token = {}, {}, {}, {}
  sessions_init("link")
  for index, line in ipairs(my_lines(args[1], tonumber(args[2]))) do
    local access, rest = line:match("^(%S+) (.+)$")
    local id = prefix .. index
    links[index] = {}
    for facebook in rest:gmatch("%S+") do
      table.insert(links[index], wrk.format("POST", "/v1/users/me/identities",
        { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. access, ["X-Request-Id"] = id },
        '{"provider":"facebook","credential":{"accessToken":"' .. facebook .. '"}}'))
    end
    next_token[index] = 1
    unlinks[index] = wrk.format("DELETE", "/v1/users/me/identities/facebook",
      { ["Authorization"] = "Bearer " .. access, ["X-Request-Id"] = id })
    linked[index] = false
    session_free(index)
  end
end

function request()
  local index = session_take()
  if not index then
    bump("starved")
    return wrk.format("DELETE", "/v1/users/me/identities/facebook")
  end
  if linked[index] then return unlinks[index] end
  local link = links[index][next_token[index]]
  if not link then
    bump("exhausted")
    return wrk.format("DELETE", "/v1/users/me/identities/facebook")
  end
  return link
end

function response(status, headers, body)
  local index = session_of(headers)
  local expected = 200
  if index and not linked[index] and status == 201 then expected = 201 end
  local succeeded = count(status, expected)
  if not index then return end
  if succeeded then
    bump(linked[index] and "unlink" or "link")
    if not linked[index] then next_token[index] = next_token[index] + 1 end
    linked[index] = not linked[index]
  end
  session_settle(index, succeeded)
end
