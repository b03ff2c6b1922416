import type { Clock } from '../http/context.js';
import { RateLimiter } from '../http/rate-limit.js';
import type { UserRecord } from '../store/schema.js';
import { decoyHash, verifyPassword } from './password.js';
import { invalidCredentials, type UsersService } from './users.js';

const WINDOW_MS = 5 * 60 * 1000;

/**
 * Password checks with brute-force limits: failures count per username and per address, and
 * once over either limit the attempt is refused before the password is even looked at.
 */
export class LoginService {
  private readonly perUser: RateLimiter;
  private readonly perAddress: RateLimiter;

  constructor(
    private readonly users: UsersService,
    clock: Clock,
    limits = { perUser: 5, perAddress: 30 },
  ) {
    this.perUser = new RateLimiter(limits.perUser, WINDOW_MS, clock);
    this.perAddress = new RateLimiter(limits.perAddress, WINDOW_MS, clock);
  }

  async authenticate(username: string, password: string, address: string): Promise<UserRecord> {
    const userKey = username.toLowerCase();
    this.perUser.check(userKey);
    this.perAddress.check(address);
    const user = this.users.findByName(username);
    const ok = await verifyPassword(password, user?.password_hash ?? (await decoyHash));
    if (!user || !ok) {
      this.perUser.hit(userKey);
      this.perAddress.hit(address);
      throw invalidCredentials();
    }
    this.perUser.reset(userKey);
    return user;
  }
}
