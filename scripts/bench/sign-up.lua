-- New Apple users sign up: POST /v1/sign-in with identity tokens of users Tether has
-- never seen, each presented once, 201 expected. Should the tokens run out, the script
-- starts over (those answers are 200s, counted as errors) and reports exhausted=N.
-- Arguments: TOKENS_FILE THREADS.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "common.lua")

function init(args)
  tokens = my_lines(args[1], tonumber(args[2]))
  cursor = 0
end

function request()
  cursor = cursor + 1
  if cursor > #tokens then
    bump("exhausted")
    cursor = 1
  end
  return wrk.format("POST", "/v1/sign-in", { ["Content-Type"] = "application/json" },
    '{"provider":"apple","credential":{"identityToken":"' .. tokens[cursor] .. '"}}')
end

function response(status, headers, body)
  count(status, 201)
end
