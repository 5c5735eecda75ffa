// A real OAuth 2.0 server for tests (oauth2-mock-server: its own /authorize, which redirects back
// with a code, and its own POST /token, which checks the PKCE verifier against the challenge),
// dressed with the profile APIs of Nubo's two presets:
//   github: POST /token, GET /user, GET /user/emails (bearer token)
//   qq:     GET /oauth2.0/token (QQ's GET form, handed to the real POST /token),
//           GET /oauth2.0/me?access_token&unionid=1&fmt=json, GET /user/get_user_info
// Tokens the profile APIs accept are only those the token endpoint issued. The client secret must
// be NUBO_OAUTH_CLIENT_SECRET (default "mock-secret"), otherwise the token endpoint answers 401.
// `POST /control {github?, qq?}` sets the profiles the next sign-ins see; `github.emails: []` is a
// person without a verified e-mail address.
//
// Prints its base URL (http://127.0.0.1:PORT) as the first line of stdout; exits when stdin closes,
// so a test that dies takes it along.
import { OAuth2Server, Events } from "oauth2-mock-server";

const secret = process.env.NUBO_OAUTH_CLIENT_SECRET ?? "mock-secret";
const profiles = {
  github: {
    id: 4242,
    login: "octo",
    name: "Octo Cat",
    emails: [
      { email: "octo-alt@example.com", primary: false, verified: true },
      { email: "octo@example.com", primary: true, verified: true },
    ],
  },
  qq: { openid: "OPENID-1", unionid: "UNIONID-1", nickname: "企鹅" },
};
const issued = new Set();

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
const service = server.service;

service.on(Events.BeforeResponse, (response, req) => {
  const given = req.body?.client_secret;
  if (given !== secret) {
    response.statusCode = 401;
    response.body = { error: "invalid_client", error_description: "client authentication failed" };
    return;
  }
  if (response.statusCode === 200 && response.body.access_token) issued.add(response.body.access_token);
});

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
const bearer = (req) => (req.headers.authorization ?? "").replace(/^Bearer /i, "");
const one = (value) => (Array.isArray(value) ? value[0] : value);

service.addRoute("POST", "/control", (req, res) => {
  Object.assign(profiles, req.body ?? {});
  json(res, 200, profiles);
});

service.addRoute("GET", "/user", (req, res) => {
  if (!issued.has(bearer(req))) return json(res, 401, { message: "Bad credentials" });
  const { id, login, name } = profiles.github;
  json(res, 200, { id, login, name });
});
service.addRoute("GET", "/user/emails", (req, res) => {
  if (!issued.has(bearer(req))) return json(res, 401, { message: "Bad credentials" });
  json(res, 200, profiles.github.emails);
});

service.addRoute("GET", "/oauth2.0/token", async (req, res) => {
  const { fmt: _fmt, ...params } = Object.fromEntries(Object.entries(req.query).map(([k, v]) => [k, one(v)]));
  const answer = await fetch(`${base}/token`, { method: "POST", body: new URLSearchParams(params) });
  json(res, answer.status, await answer.json());
});
service.addRoute("GET", "/oauth2.0/me", (req, res) => {
  if (!issued.has(one(req.query.access_token))) {
    return json(res, 200, { error: 100016, error_description: "access token check failed" });
  }
  const { openid, unionid } = profiles.qq;
  json(res, 200, one(req.query.unionid) === "1" && unionid ? { client_id: "mock", openid, unionid } : { client_id: "mock", openid });
});
service.addRoute("GET", "/user/get_user_info", (req, res) => {
  if (!issued.has(one(req.query.access_token))) return json(res, 200, { ret: 100016, msg: "access token check failed" });
  json(res, 200, { ret: 0, msg: "", nickname: profiles.qq.nickname });
});

await server.start(0, "127.0.0.1");
const base = `http://127.0.0.1:${server.address().port}`;
console.log(base);

process.stdin.on("end", () => server.stop().then(() => process.exit(0)));
process.stdin.on("close", () => process.exit(0));
process.stdin.resume();
