-- rlgate-headers.lua: puts rlgate's rate-limit headers on the answers to
-- requests it admitted as lighttpd's FastCGI Authorizer
-- (www/lighttpd/authorizer.conf). Loaded by www/lighttpd/authorizer-headers.conf
-- (mod_magnet, lighttpd >= 1.4.65 for the lighty.r API and the
-- response-start hook; written for and tested with 1.4.69).
--
-- Why: lighttpd drops every plain header of an authorizer's 200 (RateLimit,
-- RateLimit-Remaining...), so a client served a static file, a CGI or a
-- 404 by lighttpd never sees them. It keeps the Variable-* headers, as
-- request environment: rlgate sends each of its rate-limit headers a second
-- time as Variable-Rlgate-<Header-Name>, which lighttpd keeps as
-- Rlgate-RateLimit-Remaining=2 in lighty.r.req_env (a CGI or FastCGI
-- backend sees RLGATE_RATELIMIT_REMAINING=2). This script runs when the
-- answer's headers are ready (magnet.attract-response-start-to) and copies
-- them back under their own names.
--
-- Safe against clients: lighty.r.req_env is the request's environment
-- (authorizer Variable-*, setenv.set-environment), never the client's
-- headers; a client's "Rlgate-RateLimit: x" header is only HTTP_RLGATE_RATELIMIT
-- for a CGI, and does not end up here. No admitted answer from rlgate
-- (an exempt route, style "none", a store failure with on_error = open):
-- no RLGATE_* variable, nothing added.
--
-- Headers are added only to an answer that has none of them: rlgate's own
-- 429 (which carries them already, and no Variable-*) and a backend that
-- sets any of the same headers itself (a CGI's RateLimit-Remaining...) are
-- left exactly as they are, never given a second copy or a mix of two
-- sources. Any status gets them (200, 304, lighttpd's 404, a backend's
-- 5xx...): rlgate counted the request either way.

local r = lighty.r
local resp = r.resp_header

-- rlgate's Variable-Rlgate-<Header-Name>, by the name lighttpd gives the
-- backends (upper case, "_"), -> the response header; in rlgate's order
local map = {
    { "RLGATE_RATELIMIT_POLICY",      "RateLimit-Policy" },
    { "RLGATE_RATELIMIT",             "RateLimit" },
    { "RLGATE_RATELIMIT_LIMIT",       "RateLimit-Limit" },
    { "RLGATE_RATELIMIT_REMAINING",   "RateLimit-Remaining" },
    { "RLGATE_RATELIMIT_RESET",       "RateLimit-Reset" },
    { "RLGATE_X_RATELIMIT_LIMIT",     "X-RateLimit-Limit" },
    { "RLGATE_X_RATELIMIT_REMAINING", "X-RateLimit-Remaining" },
    { "RLGATE_X_RATELIMIT_RESET",     "X-RateLimit-Reset" },
}

-- lighttpd 1.4.69 keeps the name as rlgate wrote it in lighty.r.req_env
-- ("Rlgate-RateLimit-Remaining"); only the environment it builds for a
-- CGI or FastCGI backend is upper-cased with "_". Match either spelling.
local env = {}
for k, v in pairs(r.req_env) do
    local u = string.upper((string.gsub(k, "-", "_")))
    if string.sub(u, 1, 7) == "RLGATE_" and v ~= "" then
        env[u] = v
    end
end

local add = {}
for _, m in ipairs(map) do
    local v = env[m[1]]
    if v ~= nil then
        local have = resp[m[2]]
        if have ~= nil and have ~= "" then
            -- the answer has one of them already (rlgate's own 429, a
            -- backend's own rate-limit headers): leave them all alone
            -- rather than mix two sources
            return 0
        end
        add[#add + 1] = { m[2], v }
    end
end

for _, h in ipairs(add) do
    resp[h[1]] = h[2]
end

-- 0: carry on with the answer as it is (status, body)
return 0
