// The slice of the `bcrypt` package (a CommonJS native addon without bundled types) that we use.
declare module 'bcrypt' {
  const bcrypt: {
    hash(data: string | Buffer, saltOrRounds: string | number): Promise<string>;
    compare(data: string | Buffer, encrypted: string): Promise<boolean>;
  };
  export default bcrypt;
}
