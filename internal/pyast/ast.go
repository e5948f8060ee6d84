package pyast

// Node is one node of a Python AST, with the fields of CPython's ast
// classes that ast.unparse reads. Kind is the class name ("FunctionDef",
// "BinOp", ...); which fields are set depends on it (see the parser).
type Node struct {
	Kind string
	// Name is the identifier of Name, FunctionDef, ClassDef, Attribute
	// (attr), keyword (arg, "" for **), alias (name), ExceptHandler (name),
	// arg (arg), ImportFrom (module), Global/Nonlocal (joined names: Names).
	Name   string
	AsName string
	Names  []string
	// Op is the operator of BinOp, UnaryOp, BoolOp, AugAssign.
	Op string
	// Ops are the operators of a Compare.
	Ops []string
	// Const is the value of a Constant.
	Const *Const
	// Level is ImportFrom's level; Conversion is FormattedValue's (-1 none).
	Level      int
	Conversion int
	// Async marks AsyncFunctionDef-like statements and async comprehensions;
	// Simple is AnnAssign.simple; Star marks TryStar.
	Async  bool
	Simple bool
	// Paren records that the expression was written in parentheses (used
	// only to decide AnnAssign.simple).
	Paren bool

	// Generic children; each kind documents its use in the parser.
	Value, Target, Test, Left, Right, Body1, OrElse1 *Node
	Lower, Upper, Step                               *Node
	Annotation, Returns, Msg, Cause, FormatSpec      *Node
	Args                                             *Arguments

	Body, OrElse, FinalBody, Handlers []*Node
	Elts, Keys, Values                []*Node // Tuple/List/Set elts; Dict keys (nil for **) and values; BoolOp/JoinedStr values
	Targets, Decorators, Bases        []*Node
	Keywords, Generators, Ifs, Items  []*Node
	Comparators                       []*Node
}

// Arguments is ast.arguments.
type Arguments struct {
	PosOnly, Args []*Node // arg nodes
	Vararg        *Node
	KwOnly        []*Node
	KwDefaults    []*Node // nil entries for no default
	Kwarg         *Node
	Defaults      []*Node
}

// ConstKind is the Python type of a Constant.
type ConstKind int

// Constant types.
const (
	CStr ConstKind = iota
	CBytes
	CInt
	CFloat
	CComplex
	CNone
	CTrue
	CFalse
	CEllipsis
)

// Const is a Constant's value. Str holds str text or bytes (as bytes in a
// Go string); Num holds a number's canonical repr.
type Const struct {
	Kind ConstKind
	Str  string
	Num  string
	U    bool // the kind "u" (a u-prefixed string)
}
