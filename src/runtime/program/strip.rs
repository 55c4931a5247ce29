//! TypeScript to JavaScript by blanking: every type is overwritten with
//! spaces where it stands, as Node's and Deno's type stripping do, so each
//! line and column of what runs is the line and column the model wrote and
//! an error points at the model's own text. Constructs that need a real
//! transform (enums, namespaces, decorators, parameter properties) are
//! refused with the fix, never rewritten.

use oxc_ast::ast::*;
use oxc_ast_visit::{walk, Visit};
use oxc_span::{GetSpan, Span};

/// What the walk found: the byte ranges to blank, where the program's last
/// expression statement starts, and the first construct it refuses.
#[derive(Default)]
pub(super) struct Edits {
    /// Byte ranges to overwrite with spaces (newlines kept).
    pub blanks: Vec<(u32, u32)>,
    /// Byte offsets where a whole statement was blanked: a `;` goes there,
    /// so the statements around it never join into one.
    pub semis: Vec<u32>,
    /// The first refused construct.
    pub refused: Option<Refusal>,
    /// A global the program uses that only a host has (`require`,
    /// `fetch`, ...), never declared by the program itself: its offset and name.
    pub host_global: Option<(u32, String)>,
    /// Names the program binds anywhere (a host global it declares is its own).
    pub bound: Vec<String>,
}

/// A construct that cannot run, and why.
pub(super) struct Refusal {
    /// Its byte offset.
    pub at: u32,
    /// Why, and what to write instead.
    pub message: String,
    /// It reaches for what only a host has (a module): the error says how
    /// programs reach the world instead.
    pub host: bool,
}

/// Collects the edits of `program`, whose text is `source`.
pub(super) fn edits(program: &Program<'_>, source: &str) -> Edits {
    let mut walker = Walker {
        source,
        edits: Edits::default(),
        host_refs: Vec::new(),
    };
    walker.visit_program(program);
    let Walker {
        mut edits,
        host_refs,
        ..
    } = walker;
    edits.host_global = host_refs
        .into_iter()
        .find(|(_, name)| !edits.bound.iter().any(|b| b == name));
    edits
}

/// Globals a program in a host (Node, Deno, a browser) reaches the world
/// through; here it reaches it only through `tools`.
pub(super) const HOST_GLOBALS: &[&str] = &[
    "require",
    "module",
    "exports",
    "__dirname",
    "__filename",
    "process",
    "Deno",
    "Bun",
    "fetch",
    "XMLHttpRequest",
    "WebSocket",
    "EventSource",
    "window",
    "document",
    "localStorage",
    "navigator",
];

struct Walker<'s> {
    source: &'s str,
    edits: Edits,
    host_refs: Vec<(u32, String)>,
}

impl Walker<'_> {
    fn blank(&mut self, span: Span) {
        if span.start < span.end {
            self.edits.blanks.push((span.start, span.end));
        }
    }

    /// Blanks a whole statement or class member, with a `;` in its place.
    fn blank_statement(&mut self, span: Span) {
        self.blank(span);
        self.edits.semis.push(span.start);
    }

    fn refuse(&mut self, at: u32, message: impl Into<String>) {
        self.refuse_as(at, message, false);
    }

    /// Refuses a reach for a module.
    fn refuse_module(&mut self, at: u32, message: impl Into<String>) {
        self.refuse_as(at, message, true);
    }

    fn refuse_as(&mut self, at: u32, message: impl Into<String>, host: bool) {
        if self.edits.refused.is_none() {
            self.edits.refused = Some(Refusal {
                at,
                message: message.into(),
                host,
            });
        }
    }

    /// Blanks the modifier keywords TypeScript allows before a class
    /// member's or parameter's name (`public`, `readonly`, ...), which the
    /// AST records as flags without spans: they are the words between
    /// `from` and `to`.
    fn blank_modifiers(&mut self, from: u32, to: u32) {
        const MODIFIERS: &[&str] = &[
            "public",
            "private",
            "protected",
            "readonly",
            "override",
            "declare",
            "abstract",
        ];
        let Some(text) = self.source.get(from as usize..to as usize) else {
            return;
        };
        let mut offset = 0usize;
        for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')) {
            if MODIFIERS.contains(&word) {
                let start = from + offset as u32;
                self.blank(Span::new(start, start + word.len() as u32));
            }
            offset += word.len() + 1;
        }
    }

    /// Blanks the `mark` right after a name: the `?` of an optional
    /// parameter or member, the `!` of a definite assignment. The parser
    /// may count the mark into the name's span or not; a name holds neither
    /// character, so it is looked for from the name's start to its
    /// annotation (or one past its end).
    fn blank_mark(&mut self, name: Span, annotation: Option<&TSTypeAnnotation<'_>>, mark: &str) {
        let to = annotation.map_or(name.end + 1, |t| t.span.start);
        let to = to.min(self.source.len() as u32).max(name.start);
        if let Some(at) = self.find(name.start, to, mark) {
            self.blank(Span::new(at, at + 1));
        }
    }

    /// The offset of `word` between `from` and `to`, where the AST keeps no
    /// span for a keyword (`implements`).
    fn find(&self, from: u32, to: u32, word: &str) -> Option<u32> {
        let text = self.source.get(from as usize..to as usize)?;
        text.find(word).map(|i| from + i as u32)
    }
}

impl<'a> Visit<'a> for Walker<'_> {
    fn visit_statement(&mut self, it: &Statement<'a>) {
        match it {
            Statement::TSTypeAliasDeclaration(d) => self.blank_statement(d.span),
            Statement::TSInterfaceDeclaration(d) => self.blank_statement(d.span),
            Statement::TSEnumDeclaration(d) if d.declare => self.blank_statement(d.span),
            Statement::TSEnumDeclaration(d) => self.refuse(
                d.span.start,
                format!(
                    "TypeScript enums need a transform that run_code does not make: use a plain object, `const {} = {{ A: \"A\", B: \"B\" }}`",
                    d.id.name
                ),
            ),
            Statement::TSModuleDeclaration(d) if d.declare || d.body.is_none() => {
                self.blank_statement(d.span)
            }
            Statement::TSModuleDeclaration(d) => self.refuse(
                d.span.start,
                "TypeScript namespaces need a transform that run_code does not make: declare plain functions and objects instead",
            ),
            Statement::TSGlobalDeclaration(d) => self.blank_statement(d.span),
            Statement::TSImportEqualsDeclaration(d) => self.refuse_module(
                d.span.start,
                "programs cannot import modules (`import ... = require(...)`)",
            ),
            Statement::TSExportAssignment(d) => self.refuse(
                d.span.start,
                "`export =` has nothing to export to: a program is the body of a function; `return` its result",
            ),
            Statement::TSNamespaceExportDeclaration(d) => self.blank_statement(d.span),
            Statement::VariableDeclaration(d) if d.declare => self.blank_statement(d.span),
            Statement::ClassDeclaration(c) if c.declare => self.blank_statement(c.span),
            Statement::FunctionDeclaration(f)
                if f.declare || f.r#type == FunctionType::TSDeclareFunction =>
            {
                self.blank_statement(f.span)
            }
            _ => walk::walk_statement(self, it),
        }
    }

    fn visit_import_declaration(&mut self, it: &ImportDeclaration<'a>) {
        if it.import_kind.is_type() {
            self.blank_statement(it.span);
        } else {
            self.refuse_module(
                it.span.start,
                format!("programs cannot import modules (`{}`)", it.source.value),
            );
        }
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        self.refuse_module(
            it.span.start,
            "programs cannot import modules (`import(...)`)",
        );
    }

    fn visit_export_named_declaration(&mut self, it: &ExportNamedDeclaration<'a>) {
        match &it.declaration {
            _ if it.export_kind.is_type() => self.blank_statement(it.span),
            // `export function main() {...}`: the declaration stands, as a
            // plain one; there is no module to export from.
            Some(declaration) => {
                self.blank(Span::new(it.span.start, declaration.span().start));
                self.visit_declaration(declaration);
            }
            None if it.source.is_some() => self.refuse_module(
                it.span.start,
                "programs cannot import modules (`export ... from`)",
            ),
            None => self.blank_statement(it.span),
        }
    }

    fn visit_export_default_declaration(&mut self, it: &ExportDefaultDeclaration<'a>) {
        match &it.declaration {
            ExportDefaultDeclarationKind::FunctionDeclaration(_)
            | ExportDefaultDeclarationKind::ClassDeclaration(_) => {
                self.blank(Span::new(it.span.start, it.declaration.span().start));
                walk::walk_export_default_declaration(self, it);
            }
            _ => self.refuse(
                it.span.start,
                "`export default` has nothing to export to: a program is the body of a function; `return` its result",
            ),
        }
    }

    fn visit_ts_type_annotation(&mut self, it: &TSTypeAnnotation<'a>) {
        self.blank(it.span);
    }

    fn visit_ts_type_parameter_declaration(&mut self, it: &TSTypeParameterDeclaration<'a>) {
        self.blank(it.span);
    }

    fn visit_ts_type_parameter_instantiation(&mut self, it: &TSTypeParameterInstantiation<'a>) {
        self.blank(it.span);
    }

    fn visit_ts_as_expression(&mut self, it: &TSAsExpression<'a>) {
        self.blank(Span::new(it.expression.span().end, it.span.end));
        self.visit_expression(&it.expression);
    }

    fn visit_ts_satisfies_expression(&mut self, it: &TSSatisfiesExpression<'a>) {
        self.blank(Span::new(it.expression.span().end, it.span.end));
        self.visit_expression(&it.expression);
    }

    fn visit_ts_non_null_expression(&mut self, it: &TSNonNullExpression<'a>) {
        self.blank(Span::new(it.expression.span().end, it.span.end));
        self.visit_expression(&it.expression);
    }

    fn visit_ts_type_assertion(&mut self, it: &TSTypeAssertion<'a>) {
        self.blank(Span::new(it.span.start, it.expression.span().start));
        self.visit_expression(&it.expression);
    }

    fn visit_ts_instantiation_expression(&mut self, it: &TSInstantiationExpression<'a>) {
        self.blank(it.type_arguments.span);
        self.visit_expression(&it.expression);
    }

    fn visit_ts_this_parameter(&mut self, it: &TSThisParameter<'a>) {
        // `this: T,`: the comma after it goes too.
        let mut end = it.span.end;
        let rest = &self.source[end as usize..];
        let trimmed = rest.trim_start();
        if trimmed.starts_with(',') {
            end += (rest.len() - trimmed.len() + 1) as u32;
        }
        self.blank(Span::new(it.span.start, end));
    }

    fn visit_decorator(&mut self, it: &Decorator<'a>) {
        self.refuse(
            it.span.start,
            "decorators need a transform that run_code does not make: call the function on the value instead",
        );
    }

    fn visit_formal_parameter(&mut self, it: &FormalParameter<'a>) {
        if it.accessibility.is_some() || it.readonly || it.r#override {
            self.refuse(
                it.span.start,
                "constructor parameter properties (`constructor(private x: T)`) need a transform that run_code does not make: declare the field and assign it in the constructor",
            );
        }
        walk::walk_formal_parameter(self, it);
    }

    fn visit_binding_pattern(&mut self, it: &BindingPattern<'a>) {
        let name = it.kind.span();
        match it.kind {
            BindingPatternKind::BindingIdentifier(_) => {
                self.blank_mark(name, it.type_annotation.as_deref(), "?");
            }
            // A destructuring pattern's own text may hold a `?`: only after it.
            _ if it.optional => {
                let after = Span::new(name.end, name.end);
                self.blank_mark(after, it.type_annotation.as_deref(), "?");
            }
            _ => {}
        }
        walk::walk_binding_pattern(self, it);
    }

    fn visit_binding_identifier(&mut self, it: &BindingIdentifier<'a>) {
        self.edits.bound.push(it.name.to_string());
    }

    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        if HOST_GLOBALS.contains(&it.name.as_str()) {
            self.host_refs.push((it.span.start, it.name.to_string()));
        }
    }

    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        // `typeof process !== "undefined"` asks, and is answered "undefined".
        if it.operator == UnaryOperator::Typeof && matches!(it.argument, Expression::Identifier(_))
        {
            return;
        }
        walk::walk_unary_expression(self, it);
    }

    fn visit_variable_declarator(&mut self, it: &VariableDeclarator<'a>) {
        if it.definite {
            self.blank_mark(it.id.kind.span(), it.id.type_annotation.as_deref(), "!");
        }
        walk::walk_variable_declarator(self, it);
    }

    fn visit_class(&mut self, it: &Class<'a>) {
        if it.r#abstract {
            if let Some(at) = self.find(it.span.start, it.span.end, "abstract") {
                self.blank(Span::new(at, at + "abstract".len() as u32));
            }
        }
        if let (Some(first), Some(last)) = (it.implements.first(), it.implements.last()) {
            let from = it
                .super_type_arguments
                .as_ref()
                .map(|a| a.span.end)
                .or(it.super_class.as_ref().map(|s| s.span().end))
                .or(it.id.as_ref().map(|id| id.span.end))
                .unwrap_or(it.span.start);
            if let Some(at) = self.find(from, first.span.start, "implements") {
                self.blank(Span::new(at, last.span.end));
            }
        }
        for d in &it.decorators {
            self.visit_decorator(d);
        }
        if let Some(id) = &it.id {
            self.visit_binding_identifier(id);
        }
        if let Some(t) = &it.type_parameters {
            self.visit_ts_type_parameter_declaration(t);
        }
        if let Some(s) = &it.super_class {
            self.visit_expression(s);
        }
        if let Some(t) = &it.super_type_arguments {
            self.visit_ts_type_parameter_instantiation(t);
        }
        self.visit_class_body(&it.body);
    }

    fn visit_class_element(&mut self, it: &ClassElement<'a>) {
        match it {
            ClassElement::TSIndexSignature(s) => self.blank_statement(s.span),
            ClassElement::MethodDefinition(m)
                if m.r#type == MethodDefinitionType::TSAbstractMethodDefinition
                    || m.value.body.is_none() =>
            {
                self.blank_statement(m.span)
            }
            ClassElement::MethodDefinition(m) => {
                for d in &m.decorators {
                    self.visit_decorator(d);
                }
                self.blank_modifiers(m.span.start, m.key.span().start);
                if m.optional {
                    self.blank_mark(m.key.span(), None, "?");
                }
                walk::walk_method_definition(self, m);
            }
            ClassElement::PropertyDefinition(p)
                if p.declare
                    || p.r#type == PropertyDefinitionType::TSAbstractPropertyDefinition =>
            {
                self.blank_statement(p.span)
            }
            ClassElement::PropertyDefinition(p) => {
                for d in &p.decorators {
                    self.visit_decorator(d);
                }
                self.blank_modifiers(p.span.start, p.key.span().start);
                if p.optional {
                    self.blank_mark(p.key.span(), p.type_annotation.as_deref(), "?");
                }
                if p.definite {
                    self.blank_mark(p.key.span(), p.type_annotation.as_deref(), "!");
                }
                walk::walk_property_definition(self, p);
            }
            _ => walk::walk_class_element(self, it),
        }
    }
}
