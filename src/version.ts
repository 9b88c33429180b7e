/** The SDK version, sent in the User-Agent header. Kept in step with package.json by a unit test. */
export const VERSION = "0.2.0";
