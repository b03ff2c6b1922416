import { randomUUID } from 'node:crypto';
import { AppError, conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Store } from '../store/store.js';
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
      user.password_hash = password_hash;
      // Other sessions of that user end with the old password.
      db.sessions = db.sessions.filter((s) => s.user_id !== user.id);
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

export const invalidCredentials = () =>
  new AppError(401, 'authentication_error', 'invalid_credentials', 'Wrong username or password.');
