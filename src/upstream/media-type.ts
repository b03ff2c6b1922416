/**
 * An upstream's Content-Type as svc passes it on: its media type and charset, nothing else (the
 * rest of the header is free text an upstream could fill with anything, a credential included);
 * '' for a value that is not a media type.
 */
export function mediaTypeOf(value: string): string {
  const [type, ...params] = value.split(';');
  if (!/^[\w.+-]{1,100}\/[\w.+-]{1,100}$/.test(type.trim())) return '';
  const charset = params.map((p) => p.trim()).find((p) => /^charset="?[\w.:-]{1,40}"?$/i.test(p));
  return charset ? `${type.trim()}; ${charset}` : type.trim();
}
