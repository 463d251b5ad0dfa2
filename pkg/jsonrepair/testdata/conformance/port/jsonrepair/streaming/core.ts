export function jsonrepairCore(_: any): any { return { transform() {}, flush() {} } }
