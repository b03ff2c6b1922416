/**
 * MCP names its protocol versions by date (`2025-06-18`), so versions compare as strings; what
 * is not of that form is no version svc can place, in either era.
 */
export const isDatedVersion = (version: unknown): version is string => typeof version === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(version);
