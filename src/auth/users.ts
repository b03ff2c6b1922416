import { randomUUID } from 'node:crypto';
import { AppError, conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Store, Tx } from '../store/store.js';
import type { UserRecord, UserRole } from '../store/schema.js';
import { hashPassword } from './password.js';
import { atLeast } from './roles.js';

export const toPublicUser = (u: UserRecord) => ({ id: u.id, username: u.username, role: u.role });

const sameName = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** Local accounts. Managers administer users but can neither create, promote nor touch admins. */
export class UsersService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  findByName(username: string): UserRecord | undefined {
    return this.store.all('users').find((u) => sameName(u.username, username));
  }

  list(): UserRecord[] {
    return this.store.all('users');
  }

  private requireAdministrator(actor: UserRecord): void {
    if (!atLeast(actor.role, 'manager')) throw forbidden('Only a manager or an admin can manage users.');
  }

  private requireMayTouch(actor: UserRecord, target: UserRecord | { role: UserRole }): void {
    if (target.role === 'admin' && actor.role !== 'admin') throw forbidden('Only an admin can create, change or remove an admin.');
  }

  async create(actor: UserRecord | null, input: { username: string; role: UserRole; password: string }): Promise<UserRecord> {
    if (actor) {
      this.requireAdministrator(actor);
      this.requireMayTouch(actor, input);
    }
    const password_hash = await hashPassword(input.password);
    return this.store.update((tx) => {
      if (tx.all('users').some((u) => sameName(u.username, input.username))) throw conflict('user_exists', `A user named ${input.username} exists already.`);
      const user: UserRecord = {
        id: randomUUID(),
        username: input.username,
        role: input.role,
        password_hash,
        created_at: new Date(this.clock()).toISOString(),
      };
      return tx.put('users', user);
    });
  }

  /**
   * The first start's admin, created together with the mark that its password has not been shown
   * yet (one durable write: a crash leaves either no admin or a marked one, never an unmarked
   * admin whose password nobody saw).
   */
  async createFirstAdmin(password: string): Promise<UserRecord> {
    const password_hash = await hashPassword(password);
    return this.store.update((tx) => {
      if (tx.count('users') > 0) throw conflict('user_exists', 'The store has users already.');
      const meta = tx.doc('meta');
      if (!meta) throw new Error('the store has no meta record');
      const user: UserRecord = { id: randomUUID(), username: 'admin', role: 'admin', password_hash, created_at: new Date(this.clock()).toISOString() };
      tx.put('users', user);
      tx.setDoc('meta', { ...meta, unshown_password_user: user.id });
      return user;
    });
  }

  /** The account whose generated first password was never shown, if any. */
  unshownPasswordUser(): UserRecord | undefined {
    const id = this.store.doc('meta')?.unshown_password_user;
    return id ? this.store.get('users', id) : undefined;
  }

  /** Once the first password is printed. */
  async markPasswordShown(userId: string): Promise<void> {
    await this.store.update((tx) => {
      const meta = tx.doc('meta');
      if (meta?.unshown_password_user === userId) tx.setDoc('meta', { ...meta, unshown_password_user: null });
    });
  }

  /** A new password for the account whose first one was never shown; the mark stays until this one is. */
  async resetUnshownPassword(userId: string, password: string): Promise<void> {
    const password_hash = await hashPassword(password);
    await this.store.update((tx) => {
      const user = tx.edit('users', userId);
      if (!user || tx.doc('meta')?.unshown_password_user !== userId) throw conflict('password_shown', 'That password was shown already.');
      user.password_hash = password_hash;
      endSessionsOf(tx, user.id);
    });
  }

  private target(username: string): UserRecord {
    const user = this.findByName(username);
    if (!user) throw notFound(`No user named ${username}.`);
    return user;
  }

  async setRole(actor: UserRecord, username: string, role: UserRole): Promise<UserRecord> {
    this.requireAdministrator(actor);
    const target = this.target(username);
    this.requireMayTouch(actor, target);
    this.requireMayTouch(actor, { role });
    return this.store.update((tx) => {
      const user = tx.edit('users', target.id);
      if (!user) throw notFound(`No user named ${username}.`);
      if (user.role === 'admin' && role !== 'admin' && tx.all('users').filter((u) => u.role === 'admin').length === 1) {
        throw conflict('last_admin', 'This is the last admin; promote another user first.');
      }
      user.role = role;
      return user;
    });
  }

  async setPassword(actor: UserRecord, username: string, password: string): Promise<void> {
    const target = this.target(username);
    if (target.id !== actor.id) {
      this.requireAdministrator(actor);
      this.requireMayTouch(actor, target);
    }
    const password_hash = await hashPassword(password);
    await this.store.update((tx) => {
      if (!tx.get('users', target.id)) throw notFound(`No user named ${username}.`);
      setPasswordIn(tx, target.id, password_hash);
    });
  }

  /** Removes the user, their sessions and MCP instances, and revokes the grants they approved. */
  async remove(actor: UserRecord, username: string): Promise<void> {
    this.requireAdministrator(actor);
    const target = this.target(username);
    this.requireMayTouch(actor, target);
    const nowIso = new Date(this.clock()).toISOString();
    await this.store.update((tx) => {
      if (target.role === 'admin' && tx.all('users').filter((u) => u.role === 'admin').length === 1) {
        throw conflict('last_admin', 'This is the last admin; it cannot be removed.');
      }
      tx.delete('users', target.id);
      endSessionsOf(tx, target.id);
      for (const m of tx.all('mcp_instances')) if (m.owner_id === target.id) tx.delete('mcp_instances', m.id);
      for (const found of tx.all('access_requests')) {
        if (found.user_id === target.id && found.status === 'approved') {
          const r = tx.edit('access_requests', found.id)!;
          r.status = 'revoked';
          r.revoked_at = nowIso;
          r.revoked_by = actor.id;
          r.updated_at = nowIso;
        }
      }
    });
  }
}

/** The new hash, the end of that user's sessions, and the end of an unshown first password. */
export function setPasswordIn(tx: Tx, userId: string, passwordHash: string): UserRecord {
  const user = tx.edit('users', userId)!;
  user.password_hash = passwordHash;
  // Other sessions of that user end with the old password.
  endSessionsOf(tx, userId);
  const meta = tx.doc('meta');
  if (meta?.unshown_password_user === userId) tx.setDoc('meta', { ...meta, unshown_password_user: null });
  return user;
}

function endSessionsOf(tx: Tx, userId: string): void {
  for (const s of tx.all('sessions')) if (s.user_id === userId) tx.delete('sessions', s.id_hash);
}

export const invalidCredentials = () =>
  new AppError('invalid_credentials', 'Wrong username or password.');
