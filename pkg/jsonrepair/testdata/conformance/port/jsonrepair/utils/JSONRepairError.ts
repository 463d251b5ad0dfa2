export class JSONRepairError extends Error { position: number; constructor(m: string, p: number) { super(m); this.position = p } }
