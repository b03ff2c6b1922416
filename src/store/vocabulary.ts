/**
 * The store's fixed vocabularies: values the CLI and the features import without the record
 * types or the check of db.json (schema.ts, which re-exports them; the file header there says
 * where each kind of record type lives).
 */
export const userRoles = ['user', 'power_user', 'manager', 'admin'] as const;
export type UserRole = (typeof userRoles)[number];

export const appRoles = ['scope_user_user', 'scope_user_power_user'] as const;
export type AppRole = (typeof appRoles)[number];

export const accessRequestStatuses = ['draft', 'approved', 'denied', 'expired', 'failed', 'revoked'] as const;
export type AccessRequestStatus = (typeof accessRequestStatuses)[number];

export const pullStatuses = ['queued', 'downloading', 'verifying', 'done', 'failed'] as const;
export type PullStatus = (typeof pullStatuses)[number];
