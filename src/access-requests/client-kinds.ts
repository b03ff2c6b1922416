import { inert } from '../text.js';

/** How svc knows the client behind a request: added by an admin, registered itself, or by its metadata document. */
export const clientKinds = ['registered', 'dynamic', 'metadata_document'] as const;
export type ClientKind = (typeof clientKinds)[number];

/** The review page's badge for each kind. */
export const CLIENT_KIND_BADGES: Record<ClientKind, string> = {
  registered: 'Registered by your admin',
  dynamic: 'Registered itself',
  metadata_document: 'Known by its metadata document',
};

/** Why the CLI and the terminal UI call an app unverified: its name is only its own word. */
export function unverifiedReason(kind: ClientKind | undefined): string {
  if (kind === 'dynamic') return 'no: it registered itself, so its name is its own claim';
  if (kind === 'metadata_document') return 'no: known by the metadata document at its client id, so its name is its own claim';
  return 'no: not in the OAuth client registry, so its name and client id are unverified';
}

/**
 * A name an app gave itself, as the review surfaces show it: no control or invisible format
 * characters (a right-to-left override can make "Evil" read as another app's name).
 */
export const appDisplayName = (name: string): string => inert(name.trim(), 100);
