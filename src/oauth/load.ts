import type { Logger } from '../log.js';

export type OidcModule = typeof import('oidc-provider');
/** oidc-provider's error classes (InvalidGrant, InvalidTarget, …), as the module loaded here exports them. */
export type OidcErrors = OidcModule['errors'];
export type OidcProvider = import('oidc-provider').Provider;

// oidc-provider's context and models are untyped; these aliases mark where that is so.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type OidcCtx = any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type OidcModel = any;
let loaded: Promise<OidcModule> | null = null;

/**
 * Imports oidc-provider once. It prints a notice about Node.js versions other than 22+ at import
 * and while configuring; svc supports Node 20 on purpose (decisions: Shape), so those lines go to our
 * log at debug level instead of the user's terminal. Anything else it says is logged as a warning.
 */
export function loadOidcProvider(logger: Logger): Promise<OidcModule> {
  loaded ??= withQuietConsole(logger, () => import('oidc-provider'));
  return loaded;
}

export async function withQuietConsole<T>(logger: Logger, fn: () => Promise<T> | T): Promise<T> {
  const { warn, info } = console;
  const route = (level: 'warn' | 'info') => (...args: unknown[]) => {
    const text = args.map(String).join(' ');
    if (/Unsupported runtime/.test(text)) logger.debug({ source: 'oidc-provider' }, text);
    else logger[level]({ source: 'oidc-provider' }, text);
  };
  console.warn = route('warn');
  console.info = route('info');
  try {
    return await fn();
  } finally {
    console.warn = warn;
    console.info = info;
  }
}
