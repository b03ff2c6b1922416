import { randomUUID } from 'node:crypto';
import { AppError, conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Repositories, RepositorySet } from '../store/repositories.js';
import type { UserRecord, UserRole } from '../store/schema.js';
import { hashPassword } from './password.js';
import { atLeast } from './roles.js';

export const toPublicUser = (u: UserRecord) => ({ id: u.id, username: u.username, role: u.role });

/** Local accounts. Managers administer users but can neither create, promote nor touch admins. */
export class UsersService {
  constructor(
    private readonly repos: Repositories,
    private readonly clock: Clock,
  ) {}

  findByName(username: string): Promise<UserRecord | undefined> {
    return this.repos.users.findByName(username);
  }

  get(id: string): Promise<UserRecord | undefined> {
    return this.repos.users.get(id);
  }

  list(): Promise<UserRecord[]> {
    return this.repos.users.list();
  }

  count(): Promise<number> {
    return this.repos.users.count();
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
    return this.repos.transaction(async (repos) => {
      if (await repos.users.findByName(input.username)) throw conflict('user_exists', `A user named ${input.username} exists already.`);
      const user: UserRecord = {
        id: randomUUID(),
        username: input.username,
        role: input.role,
        password_hash,
        created_at: new Date(this.clock()).toISOString(),
      };
      return repos.users.put(user);
    });
  }

  /**
   * The first start's admin, created together with the mark that its password has not been shown
   * yet (one durable write: a crash leaves either no admin or a marked one, never an unmarked
   * admin whose password nobody saw).
   */
  async createFirstAdmin(password: string): Promise<UserRecord> {
    const password_hash = await hashPassword(password);
    return this.repos.transaction(async (repos) => {
      if ((await repos.users.count()) > 0) throw conflict('user_exists', 'The store has users already.');
      const meta = await repos.meta.get();
      if (!meta) throw new Error('the store has no meta record');
      const user: UserRecord = { id: randomUUID(), username: 'admin', role: 'admin', password_hash, created_at: new Date(this.clock()).toISOString() };
      await repos.users.put(user);
      await repos.meta.set({ ...meta, unshown_password_user: user.id });
      return user;
    });
  }

  /** The account whose generated first password was never shown, if any. */
  async unshownPasswordUser(): Promise<UserRecord | undefined> {
    const id = (await this.repos.meta.get())?.unshown_password_user;
    return id ? this.repos.users.get(id) : undefined;
  }

  /** Once the first password is printed. */
  async markPasswordShown(userId: string): Promise<void> {
    await this.repos.transaction(async (repos) => {
      const meta = await repos.meta.get();
      if (meta?.unshown_password_user === userId) await repos.meta.set({ ...meta, unshown_password_user: null });
    });
  }

  /** A new password for the account whose first one was never shown; the mark stays until this one is. */
  async resetUnshownPassword(userId: string, password: string): Promise<void> {
    const password_hash = await hashPassword(password);
    await this.repos.transaction(async (repos) => {
      const user = await repos.users.get(userId);
      if (!user || (await repos.meta.get())?.unshown_password_user !== userId) throw conflict('password_shown', 'That password was shown already.');
      await repos.users.put({ ...user, password_hash });
      await endSessionsOf(repos, user.id);
    });
  }

  private async target(username: string): Promise<UserRecord> {
    const user = await this.findByName(username);
    if (!user) throw notFound(`No user named ${username}.`);
    return user;
  }

  async setRole(actor: UserRecord, username: string, role: UserRole): Promise<UserRecord> {
    this.requireAdministrator(actor);
    const target = await this.target(username);
    this.requireMayTouch(actor, target);
    this.requireMayTouch(actor, { role });
    return this.repos.transaction(async (repos) => {
      const user = await repos.users.get(target.id);
      if (!user) throw notFound(`No user named ${username}.`);
      if (user.role === 'admin' && role !== 'admin' && (await adminCount(repos)) === 1) {
        throw conflict('last_admin', 'This is the last admin; promote another user first.');
      }
      return repos.users.put({ ...user, role });
    });
  }

  async setPassword(actor: UserRecord, username: string, password: string): Promise<void> {
    const target = await this.target(username);
    if (target.id !== actor.id) {
      this.requireAdministrator(actor);
      this.requireMayTouch(actor, target);
    }
    const password_hash = await hashPassword(password);
    await this.repos.transaction(async (repos) => {
      if (!(await setPasswordIn(repos, target.id, password_hash))) throw notFound(`No user named ${username}.`);
    });
  }

  /** Removes the user, their sessions and MCP instances (and their tool lists), and revokes the grants they approved. */
  async remove(actor: UserRecord, username: string): Promise<void> {
    this.requireAdministrator(actor);
    const target = await this.target(username);
    this.requireMayTouch(actor, target);
    const nowIso = new Date(this.clock()).toISOString();
    await this.repos.transaction(async (repos) => {
      if (target.role === 'admin' && (await adminCount(repos)) === 1) {
        throw conflict('last_admin', 'This is the last admin; it cannot be removed.');
      }
      await repos.users.delete(target.id);
      await endSessionsOf(repos, target.id);
      for (const m of await repos.mcpInstances.list()) {
        if (m.owner_id !== target.id) continue;
        await repos.mcpInstances.delete(m.id);
        await repos.mcpTools.delete(m.id);
      }
      for (const found of await repos.accessRequests.list()) {
        if (found.user_id === target.id && found.status === 'approved') {
          await repos.accessRequests.put({ ...found, status: 'revoked', revoked_at: nowIso, revoked_by: actor.id, updated_at: nowIso });
        }
      }
    });
  }
}

const adminCount = async (repos: RepositorySet) => (await repos.users.list()).filter((u) => u.role === 'admin').length;

/**
 * The new hash, the end of that user's sessions, and the end of an unshown first password, in the
 * caller's transaction. Answers the user, undefined when there is none.
 */
export async function setPasswordIn(repos: RepositorySet, userId: string, passwordHash: string): Promise<UserRecord | undefined> {
  const user = await repos.users.update(userId, (u) => {
    u.password_hash = passwordHash;
  });
  if (!user) return undefined;
  // Other sessions of that user end with the old password.
  await endSessionsOf(repos, userId);
  const meta = await repos.meta.get();
  if (meta?.unshown_password_user === userId) await repos.meta.set({ ...meta, unshown_password_user: null });
  return user;
}

async function endSessionsOf(repos: RepositorySet, userId: string): Promise<void> {
  for (const s of await repos.sessions.list()) if (s.user_id === userId) await repos.sessions.delete(s.id_hash);
}

export const invalidCredentials = () =>
  new AppError('invalid_credentials', 'Wrong username or password.');
