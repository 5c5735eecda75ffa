//! Passkeys in the browser: turns the server's ceremony options (JSON, byte fields in base64url)
//! into what `navigator.credentials` takes, and the credential it answers back into that JSON.
//! Written out rather than relying on `parseCreationOptionsFromJSON`/`toJSON`, which not every
//! browser that supports passkeys has yet.

type Json = Record<string, unknown>;

export function passkeysSupported(): boolean {
  return typeof window.PublicKeyCredential === "function" && !!navigator.credentials;
}

function fromBase64url(text: string): ArrayBuffer {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(text.length / 4) * 4, "=");
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return bytes.buffer;
}

function toBase64url(buffer: ArrayBuffer | null): string | null {
  if (!buffer) return null;
  let text = "";
  for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function descriptors(list: unknown): PublicKeyCredentialDescriptor[] | undefined {
  if (!Array.isArray(list)) return undefined;
  return list.map((d: Json) => ({ ...d, id: fromBase64url(d.id as string) }) as PublicKeyCredentialDescriptor);
}

/** A credential as the server reads it: the common fields, and the response's own as base64url. */
function credentialJson(credential: PublicKeyCredential, response: Json): Json {
  return {
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    extensions: credential.getClientExtensionResults(),
    response,
  };
}

/** Registers a passkey with the options of `POST /user/authn/registration`. */
export async function createPasskey(options: Json): Promise<Json> {
  const o = options.publicKey as Json;
  const user = o.user as Json;
  const publicKey = {
    ...o,
    challenge: fromBase64url(o.challenge as string),
    user: { ...user, id: fromBase64url(user.id as string) },
    excludeCredentials: descriptors(o.excludeCredentials),
  } as PublicKeyCredentialCreationOptions;
  const credential = (await navigator.credentials.create({ publicKey })) as PublicKeyCredential | null;
  if (!credential) throw new Error("no passkey was created");
  const response = credential.response as AuthenticatorAttestationResponse;
  return credentialJson(credential, {
    attestationObject: toBase64url(response.attestationObject),
    clientDataJSON: toBase64url(response.clientDataJSON),
    transports: response.getTransports?.() ?? undefined,
  });
}

/** Signs the challenge of `POST /user/authn/options` with a passkey the person picks. */
export async function getPasskey(options: Json): Promise<Json> {
  const o = options.publicKey as Json;
  const publicKey = {
    ...o,
    challenge: fromBase64url(o.challenge as string),
    allowCredentials: descriptors(o.allowCredentials),
  } as PublicKeyCredentialRequestOptions;
  // A button press, not an autofill field: the modal prompt, whatever mediation the server names.
  const credential = (await navigator.credentials.get({ publicKey })) as PublicKeyCredential | null;
  if (!credential) throw new Error("no passkey was chosen");
  const response = credential.response as AuthenticatorAssertionResponse;
  return credentialJson(credential, {
    authenticatorData: toBase64url(response.authenticatorData),
    clientDataJSON: toBase64url(response.clientDataJSON),
    signature: toBase64url(response.signature),
    userHandle: toBase64url(response.userHandle),
  });
}
