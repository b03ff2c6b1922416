import { z } from 'zod';
import { userRoles } from '../store/schema.js';

export const usernameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a username is 1-64 letters, digits, dot, underscore or dash, starting with a letter or digit');
export const passwordSchema = z.string().min(8, 'a password has at least 8 characters').max(1024);
export const userRoleSchema = z.enum(userRoles);

export const loginBody = z.strictObject({ username: z.string().min(1).max(64), password: z.string().min(1).max(1024) });

export const publicUser = z.object({ id: z.string(), username: z.string(), role: userRoleSchema }).meta({ id: 'User' });
export const userResponse = z.object({ user: publicUser });
export const loginLink = z
  .object({
    url: z.string().describe('Opens the home page signed in as you, in any browser: once, until expires_at'),
    expires_at: z.string().describe('60 seconds from now'),
  })
  .meta({ id: 'LoginLink' });
export const userList = z.object({ data: z.array(publicUser.extend({ created_at: z.string() })) });

export const createUserBody = z.strictObject({ username: usernameSchema, role: userRoleSchema, password: passwordSchema });
export const setRoleBody = z.strictObject({ role: userRoleSchema });
export const setPasswordBody = z.strictObject({ password: passwordSchema });
export const usernameParams = z.object({ username: z.string().max(200) });
