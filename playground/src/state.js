// The page's state in the URL fragment, so a link reproduces what someone saw:
//
//   #obs=<base64url of the observation text>&ctx=<base64url of the context JSON>&as=<render format>
//
// base64url is RFC 4648 §5 (no padding needed on input) of the UTF-8 bytes.
// Members the page does not know are ignored; a member that does not decode is
// reported and the default is used instead.

/** base64url of a string's UTF-8 bytes, unpadded. */
export function encode(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** The string whose UTF-8 bytes `b64` encodes; throws on anything else. */
export function decode(b64) {
  const std = b64.replaceAll('-', '+').replaceAll('_', '/');
  const bin = atob(std + '='.repeat((4 - (std.length % 4)) % 4));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
}

/** Reads `#obs=..&ctx=..&as=..`; returns {obs?, ctx?, as?, problems: string[]}. */
export function readFragment(hash) {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const out = { problems: [] };
  for (const key of ['obs', 'ctx']) {
    const v = params.get(key);
    if (v === null) continue;
    try {
      out[key] = decode(v);
    } catch (e) {
      out.problems.push(`#${key} is not base64url of UTF-8 text (${e.message}); using the default`);
    }
  }
  if (params.get('as')) out.as = params.get('as');
  return out;
}

/** The fragment for a state. */
export function writeFragment({ obs, ctx, as }) {
  return `#obs=${encode(obs)}&ctx=${encode(ctx)}&as=${encodeURIComponent(as)}`;
}
