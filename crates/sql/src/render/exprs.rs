//! The parts of an expression engines spell differently: function calls, `CASE`, windows,
//! and literals whose type an engine cannot infer.

use super::Writer;
use crate::calls::{write_call, Arg, ArgType};
use apijet_core::Value;
use apijet_plan::query::{CastType, Expr, OrderItem};
use apijet_plan::schema::ColumnKind;

impl Writer<'_> {
    /// `name(args)` as the engine spells it.
    pub(super) fn func(&mut self, name: &str, args: &[Expr], distinct: bool, out: &mut String) {
        if name == "length" && args.len() == 1 && !distinct {
            let arg = self.arg(&args[0]);
            let kind = if arg.ty == ArgType::Text {
                ColumnKind::Text
            } else {
                ColumnKind::Other
            };
            let mut text = String::new();
            self.d.as_text(&arg.sql, kind, &mut text);
            self.d.text_length(&text, out);
            return;
        }
        if name == "json_length" {
            let arg = args.first().map(|a| self.sub(a)).unwrap_or_default();
            self.d.json_length(&arg, out);
            return;
        }
        let mut rendered = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let translated = match a {
                Expr::Value(Value::Text(fmt))
                    if i == 1 && matches!(name, "date_format" | "time_format") =>
                {
                    self.d.date_format(fmt).map(Value::Text)
                }
                _ => None,
            };
            rendered.push(match translated {
                Some(v) => Arg {
                    sql: self.typed_bind(&v),
                    ty: ArgType::Text,
                },
                None => self.arg(a),
            });
        }
        let mut call = String::new();
        write_call(self.d.engine(), name, &rendered, distinct, &mut call);
        self.d.wrap_function(name, &call, out);
    }

    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    pub(super) fn case(
        &mut self,
        operand: Option<&Expr>,
        whens: &[(Expr, Expr)],
        otherwise: Option<&Expr>,
        out: &mut String,
    ) {
        out.push_str("CASE");
        if let Some(o) = operand {
            out.push(' ');
            let a = self.arg(o);
            out.push_str(&a.sql);
        }
        for (w, t) in whens {
            out.push_str(" WHEN ");
            let a = self.arg(w);
            out.push_str(&a.sql);
            out.push_str(" THEN ");
            let a = self.arg(t);
            out.push_str(&a.sql);
        }
        if let Some(e) = otherwise {
            out.push_str(" ELSE ");
            let a = self.arg(e);
            out.push_str(&a.sql);
        }
        out.push_str(" END");
    }

    /// `OVER ([PARTITION BY …] [ORDER BY …])`.
    pub(super) fn over(&mut self, partition: &[Expr], order: &[OrderItem], out: &mut String) {
        out.push_str("OVER (");
        if !partition.is_empty() {
            out.push_str("PARTITION BY ");
            for (i, p) in partition.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                self.expr(p, out);
            }
        }
        let mut o = String::new();
        self.order_by(order, &mut o);
        out.push_str(if partition.is_empty() {
            o.trim_start()
        } else {
            &o
        });
        out.push(')');
    }

    /// Binds a value whose type the engine must be told.
    pub(super) fn typed_bind(&mut self, v: &Value) -> String {
        let mut s = String::new();
        if matches!(v, Value::Null) {
            s.push_str("NULL");
            return s;
        }
        self.binds
            .push(apijet_plan::template::Bind::Value(v.clone()));
        self.d.typed_placeholder(self.binds.len(), v, &mut s);
        s
    }

    /// A function argument, with what it is known to hold.
    pub(super) fn arg(&mut self, e: &Expr) -> Arg {
        let ty = match e {
            Expr::Column { kind, .. } => match kind {
                ColumnKind::Text => ArgType::Text,
                ColumnKind::Int | ColumnKind::Decimal => ArgType::Number,
                ColumnKind::Float => ArgType::Float,
                ColumnKind::Timestamp | ColumnKind::Date | ColumnKind::Time => ArgType::Temporal,
                _ => ArgType::Other,
            },
            Expr::Value(Value::Text(_)) => ArgType::Text,
            Expr::Value(Value::Int(_)) => ArgType::Number,
            Expr::Value(Value::Float(_)) => ArgType::Float,
            Expr::Cast(_, CastType::Text) => ArgType::Text,
            Expr::Cast(_, CastType::Integer | CastType::Decimal) => ArgType::Number,
            Expr::Cast(_, _) | Expr::DateAdd { .. } => ArgType::Temporal,
            _ => ArgType::Other,
        };
        let sql = match e {
            Expr::Value(v) => self.typed_bind(v),
            Expr::Star => "*".to_string(),
            other => self.sub(other),
        };
        Arg { sql, ty }
    }
}
