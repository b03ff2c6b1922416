import { randomUUID } from 'node:crypto';
import { AppError, conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Store } from '../store/store.js';
import type { Db, UserRecord, UserRole } from '../store/schema.js';
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
    return this.store.read((db) => db.users.find((u) => sameName(u.username, username)));
  }

  list(): UserRecord[] {
    return this.store.read((db) => db.users);
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
    return this.store.update((db) => {
      if (db.users.some((u) => sameName(u.username, input.username))) throw conflict('user_exists', `A user named ${input.username} exists already.`);
      const user: UserRecord = {
        id: randomUUID(),
        username: input.username,
        role: input.role,
        password_hash,
        created_at: new Date(this.clock()).toISOString(),
      };
      db.users.push(user);
      return user;
    });
  }

  /**
   * The first start's admin, created together with the mark that its password has not been shown
   * yet (one durable write: a crash leaves either no admin or a marked one, never an unmarked
   * admin whose password nobody saw).
   */
  async createFirstAdmin(password: string): Promise<UserRecord> {
    const password_hash = await hashPassword(password);
    return this.store.update((db) => {
      if (db.users.length > 0) throw conflict('user_exists', 'The store has users already.');
      if (!db.meta) throw new Error('the store has no meta record');
      const user: UserRecord = { id: randomUUID(), username: 'admin', role: 'admin', password_hash, created_at: new Date(this.clock()).toISOString() };
      db.users.push(user);
      db.meta.unshown_password_user = user.id;
      return user;
    });
  }

  /** The account whose generated first password was never shown, if any. */
  unshownPasswordUser(): UserRecord | undefined {
    return this.store.read((db) => (db.meta?.unshown_password_user ? db.users.find((u) => u.id === db.meta!.unshown_password_user) : undefined));
  }

  /** Once the first password is printed. */
  async markPasswordShown(userId: string): Promise<void> {
    await this.store.update((db) => {
      if (db.meta?.unshown_password_user === userId) db.meta.unshown_password_user = null;
    });
  }

  /** A new password for the account whose first one was never shown; the mark stays until this one is. */
  async resetUnshownPassword(userId: string, password: string): Promise<void> {
    const password_hash = await hashPassword(password);
    await this.store.update((db) => {
      const user = db.users.find((u) => u.id === userId);
      if (!user || db.meta?.unshown_password_user !== userId) throw conflict('password_shown', 'That password was shown already.');
      user.password_hash = password_hash;
      db.sessions = db.sessions.filter((s) => s.user_id !== user.id);
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
    return this.store.update((db) => {
      const user = db.users.find((u) => u.id === target.id);
      if (!user) throw notFound(`No user named ${username}.`);
      if (user.role === 'admin' && role !== 'admin' && db.users.filter((u) => u.role === 'admin').length === 1) {
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
    await this.store.update((db) => {
      const user = db.users.find((u) => u.id === target.id);
      if (!user) throw notFound(`No user named ${username}.`);
      setPasswordIn(db, user, password_hash);
    });
  }

  /** Removes the user, their sessions and MCP instances, and revokes the grants they approved. */
  async remove(actor: UserRecord, username: string): Promise<void> {
    this.requireAdministrator(actor);
    const target = this.target(username);
    this.requireMayTouch(actor, target);
    const nowIso = new Date(this.clock()).toISOString();
    await this.store.update((db) => {
      if (target.role === 'admin' && db.users.filter((u) => u.role === 'admin').length === 1) {
        throw conflict('last_admin', 'This is the last admin; it cannot be removed.');
      }
      db.users = db.users.filter((u) => u.id !== target.id);
      db.sessions = db.sessions.filter((s) => s.user_id !== target.id);
      db.mcp_instances = db.mcp_instances.filter((m) => m.owner_id !== target.id);
      for (const r of db.access_requests) {
        if (r.user_id === target.id && r.status === 'approved') {
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
export function setPasswordIn(db: Db, user: UserRecord, passwordHash: string): void {
  user.password_hash = passwordHash;
  // Other sessions of that user end with the old password.
  db.sessions = db.sessions.filter((s) => s.user_id !== user.id);
  if (db.meta?.unshown_password_user === user.id) db.meta.unshown_password_user = null;
}

export const invalidCredentials = () =>
  new AppError('invalid_credentials', 'Wrong username or password.');
