import type { AppRole, UserRole } from '../store/vocabulary.js';

const rank: Record<UserRole, number> = { user: 0, power_user: 1, manager: 2, admin: 3 };
const appRank: Record<AppRole, number> = { scope_user_user: 0, scope_user_power_user: 1 };

/** What people read for each app role; the wire (JSON, piped output) keeps the scope values. */
export const APP_ROLE_NAMES: Record<AppRole, string> = { scope_user_user: 'User', scope_user_power_user: 'Power User' };
/** What people read for each account role. */
export const USER_ROLE_NAMES: Record<UserRole, string> = { user: 'User', power_user: 'Power User', manager: 'Manager', admin: 'Admin' };

export const atLeast = (role: UserRole, needed: UserRole) => rank[role] >= rank[needed];

/** the privilege rules (decisions: Privilege rules): User grants user; PowerUser and above grant up to power user, never more. */
export const maxGrantableRole = (reviewer: UserRole): AppRole =>
  atLeast(reviewer, 'power_user') ? 'scope_user_power_user' : 'scope_user_user';

export const appRoleAtMost = (role: AppRole, cap: AppRole) => appRank[role] <= appRank[cap];

export const lowerAppRole = (a: AppRole, b: AppRole): AppRole => (appRank[a] <= appRank[b] ? a : b);
