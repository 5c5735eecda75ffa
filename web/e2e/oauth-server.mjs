// A real OAuth 2.0 server for tests (oauth2-mock-server: its own /authorize, which redirects back
// with a code, and its own POST /token, which checks the PKCE verifier against the challenge),
// dressed with the profile APIs of Nubo's two presets:
//   github: POST /token, GET /user, GET /user/emails (bearer token)
//   qq:     GET /oauth2.0/token (QQ's GET form, handed to the real POST /token),
//           GET /oauth2.0/me?access_token&unionid=1&fmt=json, GET /user/get_user_info
//   oidc:   OpenID Connect with the server's own discovery (/.well-known/openid-configuration,
//           issuer http://127.0.0.1:PORT), /authorize (which keeps the nonce) and POST /token,
//           whose ID token carries the claims of `profiles.oidc` and is signed again here
//           (node:crypto, as the event hooks run synchronously) as `oidc_mode` asks; the published key set is /oidc/keys (RS256 and ES256 keys)
// Tokens the profile APIs accept are only those the token endpoint issued. The client secret must
// be NUBO_OAUTH_CLIENT_SECRET (default "mock-secret"), in the form or in HTTP Basic
// authentication, otherwise the token endpoint answers 401.
// `POST /control {github?, qq?, oidc?, oidc_mode?}` sets the profiles the next sign-ins see;
// `github.emails: []` is a person without a verified e-mail address. `oidc_mode` (until changed):
//   null            signed with the published RS256 key
//   "es256"         signed with the published ES256 key
//   "bad_signature" signed with a key nobody published, under the RS256 key's id
//   "unknown_kid"   signed with a key nobody published, under an id nobody published
//   "rotated"       signed with a new key, published from now on (a key rotation)
//   "wrong_audience", "wrong_issuer", "expired"   one claim wrong, properly signed
//   "replay"        the token endpoint answers the previous ID token again (an old nonce)
//
// Prints its base URL (http://127.0.0.1:PORT) as the first line of stdout; exits when stdin closes,
// so a test that dies takes it along.
import { OAuth2Server, Events } from "oauth2-mock-server";
import { createPrivateKey, generateKeyPairSync, sign } from "node:crypto";

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
  oidc: {
    sub: "oidc-subject-1",
    email: "oidc@example.com",
    email_verified: true,
    preferred_username: "oidc-person",
    name: "OIDC Person",
    groups: [],
  },
};
let oidcMode = null;
let lastIdToken = null;
const issued = new Set();

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
const service = server.service;

// The OpenID Connect keys: the library's RS256 key, an ES256 key, one for a rotation (published
// once `oidc_mode` is "rotated") and a rogue one nobody publishes.
function makeKey(alg, kid) {
  const { privateKey, publicKey } =
    alg === "ES256" ? generateKeyPairSync("ec", { namedCurve: "P-256" }) : generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { alg, kid, privateKey, public: { ...publicKey.export({ format: "jwk" }), alg, kid, use: "sig" } };
}
const rsJwk = server.issuer.keys.toJSON(true)[0];
const rsKey = { alg: "RS256", kid: rsJwk.kid, privateKey: createPrivateKey({ key: rsJwk, format: "jwk" }) };
const esKey = makeKey("ES256", "es256-key");
const rotatedKey = makeKey("RS256", "rotated-key");
const rogueKey = makeKey("RS256", "never-published");

/** A compact JWS (RS256: PKCS#1 v1.5; ES256: the raw r||s signature JWS asks for). */
function signJwt(payload, key, kid) {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const input = Buffer.from(`${part({ alg: key.alg, kid, typ: "JWT" })}.${part(payload)}`);
  const options = key.alg === "ES256" ? { key: key.privateKey, dsaEncoding: "ieee-p1363" } : key.privateKey;
  return `${input}.${sign("sha256", input, options).toString("base64url")}`;
}
let published = [esKey.public];

function basicPassword(req) {
  const header = req.headers.authorization ?? "";
  if (!/^Basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6), "base64").toString();
  return decodeURIComponent(decoded.slice(decoded.indexOf(":") + 1).replace(/\+/g, " "));
}

function signIdToken(response) {
  if (oidcMode === "replay" && lastIdToken) {
    response.body.id_token = lastIdToken;
    return;
  }
  const payload = JSON.parse(Buffer.from(response.body.id_token.split(".")[1], "base64url").toString());
  Object.assign(payload, profiles.oidc);
  const now = Math.floor(Date.now() / 1000);
  if (oidcMode === "wrong_audience") payload.aud = "another-application";
  if (oidcMode === "wrong_issuer") payload.iss = "https://issuer.example";
  if (oidcMode === "expired") Object.assign(payload, { iat: now - 7200, nbf: now - 7200, exp: now - 600 });
  const [key, kid] = {
    es256: [esKey, esKey.kid],
    bad_signature: [rogueKey, rsKey.kid],
    unknown_kid: [rogueKey, rogueKey.kid],
    rotated: [rotatedKey, rotatedKey.kid],
  }[oidcMode] ?? [rsKey, rsKey.kid];
  response.body.id_token = signJwt(payload, key, kid);
  lastIdToken = response.body.id_token;
}

service.on(Events.BeforeWellKnownOpenIdConfiguration, (discovery) => {
  Object.assign(discovery.body, {
    jwks_uri: `${base}/oidc/keys`,
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    id_token_signing_alg_values_supported: ["RS256", "ES256"],
  });
});

service.on(Events.BeforeResponse, (response, req) => {
  const given = req.body?.client_secret ?? basicPassword(req);
  if (given !== secret) {
    response.statusCode = 401;
    response.body = { error: "invalid_client", error_description: "client authentication failed" };
    return;
  }
  if (response.statusCode === 200 && response.body.access_token) issued.add(response.body.access_token);
  if (response.statusCode === 200 && response.body.id_token) signIdToken(response);
});

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
const bearer = (req) => (req.headers.authorization ?? "").replace(/^Bearer /i, "");
const one = (value) => (Array.isArray(value) ? value[0] : value);

service.addRoute("POST", "/control", (req, res) => {
  const { oidc_mode: mode, ...rest } = req.body ?? {};
  if (mode !== undefined) {
    oidcMode = mode;
    if (mode === "rotated" && !published.includes(rotatedKey.public)) published.push(rotatedKey.public);
  }
  Object.assign(profiles, rest);
  json(res, 200, profiles);
});

service.addRoute("GET", "/oidc/keys", (_req, res) => {
  json(res, 200, { keys: [...server.issuer.keys.toJSON(), ...published] });
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
server.issuer.url = base;
console.log(base);

process.stdin.on("end", () => server.stop().then(() => process.exit(0)));
process.stdin.on("close", () => process.exit(0));
process.stdin.resume();
