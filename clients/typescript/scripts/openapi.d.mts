export declare const GENERATED: string;
export declare function render(doc: unknown): Promise<string>;
export declare function fetchDocument(url: string): Promise<unknown>;
